"""Whose address a login limit keys on (pure): the peer, or behind a trusted proxy the client it names."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.api.core.login_limits import client_address


@dataclass
class Asked:
    client: tuple[str, int] | None
    headers: dict[str, str] = field(default_factory=dict)


PROXIES = frozenset({"10.0.0.1", "10.0.0.2"})


@pytest.mark.parametrize(("peer", "forwarded", "address"), [
    ("192.0.2.5", "", "192.0.2.5"),
    ("192.0.2.5", "203.0.113.9", "192.0.2.5"),  # not a trusted proxy: its header is the client's word
    ("10.0.0.1", "203.0.113.9", "203.0.113.9"),
    ("10.0.0.1", "1.2.3.4, 203.0.113.9, 10.0.0.2", "203.0.113.9"),  # what the client wrote first is ignored
    ("10.0.0.1", "", "10.0.0.1"),
    ("10.0.0.1", "10.0.0.2", "10.0.0.1"),
])
def test_the_client_address_behind_trusted_proxies(peer, forwarded, address):
    headers = {"x-forwarded-for": forwarded} if forwarded else {}
    assert client_address(Asked((peer, 1234), headers), PROXIES) == address


def test_no_peer_is_an_empty_address():
    assert client_address(Asked(None), PROXIES) == ""
