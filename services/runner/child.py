"""The supervised child: loads the DAG file and runs the task's user code, output to the try's log.

It leads its own process group, which the runner's group watcher kills should the runner
die (infra/group_watcher.py). It reports an exception through a pipe as JSON and
exits 1; any other way it ends (a segfault, os._exit, a signal) the supervisor reads from
its exit status.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import traceback
from typing import NoReturn

from infra.executors.requests import TryRequest

TRACEBACK_LIMIT = 32_000  # stays well under a pipe's buffer, so the child never blocks on it


def run_child(request: TryRequest, log_path: str, report_fd: int) -> NoReturn:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        _prepare(request, log_path)
        task = _find_task(request)
        if task.kind == "bash":
            os.execv("/bin/bash", ["bash", "-c", task.command])
        task.python_callable(*task.args, **task.kwargs)
        code = 0
    except BaseException as error:  # noqa: BLE001 - every failure of user code is reported
        _report(report_fd, error)
    finally:
        _flush()
        os._exit(code)


def _prepare(request: TryRequest, log_path: str) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    output = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    faulthandler.enable(sys.stderr)  # a segfault's Python traceback goes to the try's log
    # The task's context, for user code and bash commands (TOCKRUN_*: TOCK_* names are settings).
    os.environ.update({"TOCKRUN_DAG_ID": request.dag_id, "TOCKRUN_RUN_ID": request.run_id,
                       "TOCKRUN_TASK_ID": request.task_id, "TOCKRUN_TRY_NUMBER": str(request.try_number)})


def _find_task(request: TryRequest):
    from tock import load_dags

    for dag in load_dags(request.dag_file):
        if dag.dag_id == request.dag_id:
            if request.task_id not in dag.tasks:
                raise LookupError(f"DAG {request.dag_id!r} in {request.dag_file} has no task {request.task_id!r}")
            return dag.tasks[request.task_id]
    raise LookupError(f"{request.dag_file} does not define DAG {request.dag_id!r}")


def _report(report_fd: int, error: BaseException) -> None:
    text = "".join(traceback.format_exception(error))
    print(text, file=sys.stderr)
    payload = json.dumps({"error": f"{type(error).__name__}: {error}"[:2000],
                          "traceback": text[-TRACEBACK_LIMIT:]})
    try:
        os.write(report_fd, payload.encode())
    except OSError:
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
