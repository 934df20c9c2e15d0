"""The API refuses to start with the documented placeholder admin token where others can reach it
(issue 20, item 14: the deploy files' base Secret holds it)."""

from __future__ import annotations

import pytest

from infra.settings import load_settings
from services.api.app import UnsafeSettings, refuse_unsafe_settings


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "tock-api.example.com"])
def test_the_placeholder_token_is_refused_off_loopback(host):
    settings = load_settings({"TOCK_API_TOKEN": "change-me", "TOCK_API_HOST": host})
    with pytest.raises(UnsafeSettings, match="TOCK_API_TOKEN is the placeholder 'change-me'"):
        refuse_unsafe_settings(settings)


@pytest.mark.parametrize(("token", "host"), [("change-me", "127.0.0.1"), ("change-me", "::1"),
                                             ("change-me", "localhost"), ("a-real-secret", "0.0.0.0"),
                                             (None, "0.0.0.0")])
def test_a_real_token_or_loopback_starts(token, host):
    environ = {"TOCK_API_HOST": host, **({"TOCK_API_TOKEN": token} if token else {})}
    refuse_unsafe_settings(load_settings(environ))
