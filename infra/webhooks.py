"""WebhookCaller: POSTs JSON to webhook URLs on worker threads, retrying failures with backoff.

A call is one sequence of at most ``attempts`` POSTs; an answer 2xx ends it (ok), a 5xx, 429,
a timeout or a connection error is retried after ``backoff`` seconds (doubling), anything
else (4xx) ends it (not ok). The result names how many attempts were made and the last answer.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass


@dataclass(frozen=True)
class CallOutcome:
    ok: bool
    attempts: int
    detail: str


class WebhookCaller:
    """Calls webhooks in the background; ``call`` returns a Future of the CallOutcome."""

    def __init__(self, *, attempts: int = 4, backoff: float = 0.5, timeout: float = 5.0, workers: int = 4) -> None:
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="webhook")

    def call(self, url: str, payload: dict) -> Future:
        return self.pool.submit(self._call, url, payload)

    def _call(self, url: str, payload: dict) -> CallOutcome:
        delay, detail = self.backoff, ""
        for attempt in range(1, self.attempts + 1):
            status, detail = self._post(url, payload)
            if status is not None and 200 <= status < 300:
                return CallOutcome(True, attempt, detail)
            if status is not None and status < 500 and status != 429:
                return CallOutcome(False, attempt, detail)
            if attempt < self.attempts:
                time.sleep(delay)
                delay *= 2
        return CallOutcome(False, self.attempts, detail)

    def _post(self, url: str, payload: dict) -> tuple[int | None, str]:
        """(HTTP status or None when there was no answer, a description of the outcome)."""
        request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "tock-monitor"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            return error.code, f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            return None, f"{type(error).__name__}: {error}"

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
