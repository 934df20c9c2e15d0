"""RetryPool: calls made on worker threads, each retried with a doubling backoff.

The one retry loop behind the callback callers (infra/webhooks.py, infra/callables.py): a call
is a sequence of at most ``attempts`` attempts, ``backoff`` seconds (doubling) apart. An
attempt says whether the call succeeded, may succeed if tried again, or failed for good; the
outcome names how many attempts were made and what the last one said.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


class Verdict(enum.Enum):
    """What one attempt says of its call."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"    # failed, and another attempt may succeed (a 5xx, a timeout, a crash)
    FAILED = "failed"  # failed, and another attempt would fail the same way (a 4xx)


@dataclass(frozen=True)
class CallOutcome:
    ok: bool
    attempts: int
    detail: str


Attempt = Callable[[str, dict[str, Any]], tuple[Verdict, str]]  # (target, payload) -> (verdict, detail)


class RetryPool:
    """Runs calls of ``attempt`` in the background; ``submit`` returns a Future of the CallOutcome."""

    def __init__(self, attempt: Attempt, *, attempts: int, backoff: float, workers: int, name: str) -> None:
        if attempts < 1:
            raise ValueError(f"a {name} call needs at least one attempt, not {attempts}")
        self.attempt, self.attempts, self.backoff = attempt, attempts, backoff
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix=name)

    def submit(self, target: str, payload: dict[str, Any], attempt: Attempt | None = None) -> Future[CallOutcome]:
        """Call ``target`` with ``payload`` by ``attempt`` (None: the pool's own), retried."""
        return self.pool.submit(self._call, attempt or self.attempt, target, payload)

    def _call(self, attempt: Attempt, target: str, payload: dict[str, Any]) -> CallOutcome:
        delay, detail = self.backoff, ""
        for number in range(1, self.attempts + 1):
            verdict, detail = attempt(target, payload)
            if verdict is not Verdict.RETRY:
                return CallOutcome(verdict is Verdict.SUCCEEDED, number, detail)
            if number < self.attempts:
                time.sleep(delay)
                delay *= 2
        return CallOutcome(False, self.attempts, detail)

    def close(self) -> None:
        """Stop: calls not started are dropped, a call in progress finishes on its thread."""
        self.pool.shutdown(wait=False, cancel_futures=True)
