"""CallableCaller: calls ``module:function`` callbacks in a subprocess, with a timeout and retries.

User code never runs in the monitor's process: an exception, a hang, a ``sys.exit`` or a crash
of the interpreter ends only the child (its whole process group is killed on timeout). The
child (``python -m infra.run_callable [--context] TARGET``) reads the payload as JSON on stdin and
calls ``function(payload)`` (with ``--context``: an Airflow-style context built from it); TARGET is
``module:function`` or ``/path/of/a/dag_file.py:function``; exit status 0 is success. A failure
(non-zero exit, timeout) is retried after ``backoff`` seconds (doubling), up to ``attempts`` tries,
like a webhook's 5xx: the callable may be idempotent on (dag_id, run_id, trigger, task_id,
try_number), which the payload carries. The retry loop is infra/retrying.py, shared with the
webhooks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from infra.retrying import CallOutcome, RetryPool, Verdict

_TOCK_ROOT = str(Path(__file__).resolve().parents[1])  # so the child finds infra.run_callable
DETAIL_LIMIT = 500


class CallableCaller:
    """Calls callable paths in the background; ``call`` returns a Future of the CallOutcome."""

    def __init__(self, *, timeout: float, attempts: int = 4, backoff: float = 0.5, workers: int = 4) -> None:
        self.timeout = timeout
        self.retries = RetryPool(self._attempt, attempts=attempts, backoff=backoff, workers=workers, name="callable")

    def call(self, target: str, payload: dict[str, Any], *, context: bool = False) -> Future[CallOutcome]:
        """Call ``target`` with ``payload``, or with the context built from it (``context``)."""
        return self.retries.submit(target, payload, partial(self._attempt, context=context))

    def close(self) -> None:
        self.retries.close()

    def _attempt(self, target: str, payload: dict[str, Any], context: bool = False) -> tuple[Verdict, str]:
        """Run the callable once in a child: SUCCEEDED when it returned, else RETRY, with what happened."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), _TOCK_ROOT]))}
        command = [sys.executable, "-m", "infra.run_callable", *(["--context"] if context else []), target]
        child = subprocess.Popen(command, stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _out, err = child.communicate(json.dumps(payload).encode(), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return Verdict.RETRY, f"timed out after {self.timeout:g} s (killed)"
        if child.returncode == 0:
            return Verdict.SUCCEEDED, "returned"
        lines = err.decode(errors="replace").strip().splitlines()
        return Verdict.RETRY, f"exit {child.returncode}: {lines[-1] if lines else 'no error output'}"[:DETAIL_LIMIT]
