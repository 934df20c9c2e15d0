"""CallableCaller: calls ``module:function`` callbacks in a subprocess, with a timeout and retries.

User code never runs in the monitor's process: an exception, a hang, a ``sys.exit`` or a crash
of the interpreter ends only the child (its whole process group is killed on timeout). The
child (``python -m infra.run_callable module:function``) reads the payload as JSON on stdin and
calls ``function(payload)``; exit status 0 is success. A failure (non-zero exit, timeout) is
retried after ``backoff`` seconds (doubling), up to ``attempts`` tries, like a webhook's 5xx:
the callable may be idempotent on (dag_id, run_id, trigger), which the payload carries.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from infra.webhooks import CallOutcome

_TOCK_ROOT = str(Path(__file__).resolve().parents[1])  # so the child finds infra.run_callable
DETAIL_LIMIT = 500


class CallableCaller:
    """Calls callable paths in the background; ``call`` returns a Future of the CallOutcome."""

    def __init__(self, *, timeout: float, attempts: int = 4, backoff: float = 0.5, workers: int = 4) -> None:
        self.timeout, self.attempts, self.backoff = timeout, attempts, backoff
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="callable")

    def call(self, target: str, payload: dict) -> Future:
        return self.pool.submit(self._call, target, payload)

    def _call(self, target: str, payload: dict) -> CallOutcome:
        delay, detail = self.backoff, ""
        for attempt in range(1, self.attempts + 1):
            ok, detail = self._run(target, payload)
            if ok:
                return CallOutcome(True, attempt, detail)
            if attempt < self.attempts:
                time.sleep(delay)
                delay *= 2
        return CallOutcome(False, self.attempts, detail)

    def _run(self, target: str, payload: dict) -> tuple[bool, str]:
        """(whether the callable returned, a description of the outcome)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), _TOCK_ROOT]))}
        child = subprocess.Popen([sys.executable, "-m", "infra.run_callable", target], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _out, err = child.communicate(json.dumps(payload).encode(), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return False, f"timed out after {self.timeout:g} s (killed)"
        if child.returncode == 0:
            return True, "returned"
        lines = err.decode(errors="replace").strip().splitlines()
        return False, f"exit {child.returncode}: {lines[-1] if lines else 'no error output'}"[:DETAIL_LIMIT]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
