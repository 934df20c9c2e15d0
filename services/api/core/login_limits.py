"""Wrong-password rate limiting, as a pure fold: failures per key (user name and address) in a window.

The state is a mapping key -> times of recent failures; every function returns a new state.
Time comes in as an argument. The API keeps one state per process (behind a lock), and counts an
attempt as a failure before it verifies the password (cleared when it proves right), so guesses
sent at once cannot all pass the check. The address is the client's: behind a proxy named in
TOCK_API_TRUSTED_PROXIES, the last address of X-Forwarded-For that is not one of those proxies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LoginLimits:
    attempts: int  # failures allowed within the window
    window: float  # seconds


@dataclass(frozen=True, slots=True)
class Failures:
    by_key: Mapping[str, tuple[float, ...]] = field(default_factory=lambda: MappingProxyType({}))


def _recent(times: tuple[float, ...], now: float, limits: LoginLimits) -> tuple[float, ...]:
    return tuple(at for at in times if now - at < limits.window)


def refused_for(state: Failures, key: str, now: float, limits: LoginLimits) -> float:
    """Seconds until ``key`` may try again (0: it may now)."""
    recent = _recent(state.by_key.get(key, ()), now, limits)
    if len(recent) < limits.attempts:
        return 0.0
    return max(0.0, recent[-limits.attempts] + limits.window - now)


def failed(state: Failures, key: str, now: float, limits: LoginLimits) -> Failures:
    """``key`` gave a wrong password at ``now``; keys whose failures all left the window are dropped."""
    kept = {other: recent for other, times in state.by_key.items()
            if (recent := _recent(times, now, limits)) and other != key}
    kept[key] = (*_recent(state.by_key.get(key, ()), now, limits), now)
    return Failures(MappingProxyType(kept))


def succeeded(state: Failures, key: str) -> Failures:
    """A right password clears ``key``'s failures."""
    return Failures(MappingProxyType({other: times for other, times in state.by_key.items() if other != key}))


class _Request(Protocol):  # what client_address reads of a Starlette request
    @property
    def client(self) -> tuple[str, int] | None: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


def client_address(request: _Request, trusted_proxies: frozenset[str]) -> str:
    """The address that sent the request: the peer's, unless the peer is a trusted proxy; then the last
    address of X-Forwarded-For that is not a trusted proxy (the ones before it are the client's word)."""
    peer = request.client[0] if request.client else ""
    if peer not in trusted_proxies:
        return peer
    forwarded = [part.strip() for part in request.headers.get("x-forwarded-for", "").split(",") if part.strip()]
    return next((address for address in reversed(forwarded) if address not in trusted_proxies), peer)
