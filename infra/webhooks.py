"""WebhookCaller: POSTs JSON to webhook URLs on worker threads, retrying failures with backoff.

A call is one sequence of at most ``attempts`` POSTs; an answer 2xx ends it (ok), a 5xx, 429,
a timeout or a connection error is retried after ``backoff`` seconds (doubling), anything
else (4xx) ends it (not ok). The result names how many attempts were made and the last answer.
The retry loop is infra/retrying.py, shared with the callable callbacks.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import Future
from typing import Any

from infra.retrying import CallOutcome, RetryPool, Verdict


class WebhookCaller:
    """Calls webhooks in the background; ``call`` returns a Future of the CallOutcome."""

    def __init__(self, *, attempts: int = 4, backoff: float = 0.5, timeout: float = 5.0, workers: int = 4) -> None:
        self.timeout = timeout
        self.retries = RetryPool(self._attempt, attempts=attempts, backoff=backoff, workers=workers, name="webhook")

    def call(self, url: str, payload: dict[str, Any]) -> Future[CallOutcome]:
        return self.retries.submit(url, payload)

    def close(self) -> None:
        self.retries.close()

    def _attempt(self, url: str, payload: dict[str, Any]) -> tuple[Verdict, str]:
        status, detail = self._post(url, payload)
        if status is not None and 200 <= status < 300:
            return Verdict.SUCCEEDED, detail
        if status is not None and status < 500 and status != 429:
            return Verdict.FAILED, detail
        return Verdict.RETRY, detail

    def _post(self, url: str, payload: dict[str, Any]) -> tuple[int | None, str]:
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
