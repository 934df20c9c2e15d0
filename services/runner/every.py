"""Every: says when a periodic thing (a log line while waiting, a heartbeat) is due again."""

from __future__ import annotations

import time


class Every:
    """Due once per ``seconds`` of time.monotonic(); the first time after ``seconds``, or at once."""

    def __init__(self, seconds: float, *, now: bool = False) -> None:
        self.seconds = seconds
        self._next = time.monotonic() + (0.0 if now else seconds)

    def due(self) -> bool:
        """True when the interval has passed, and starts the next interval."""
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.seconds
        return True

    def remaining(self) -> float:
        """Seconds until it is due again (0 when due)."""
        return max(0.0, self._next - time.monotonic())
