"""Supervising the child: heartbeats while it runs, the execution timeout, and how it ended."""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from services.runner.child import run_child
from services.runner.paths import TryRequest


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str = ""
    traceback: str = ""


def supervise(request: TryRequest, log_path: str, heartbeat_seconds: float,
              heartbeat: Callable[[], None]) -> Outcome:
    """Fork the child, heartbeat every ``heartbeat_seconds`` until it ends, and say how it ended."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        run_child(request, log_path, write_fd)
    os.close(write_fd)
    # A runner told to stop takes its user code with it, then reports the try failed.
    previous = signal.signal(signal.SIGTERM, lambda *_: _kill_group(pid))
    try:
        status, timed_out = _wait(pid, request.execution_timeout, heartbeat_seconds, heartbeat)
        return _outcome(status, timed_out, request.execution_timeout, _read_report(read_fd))
    finally:
        signal.signal(signal.SIGTERM, previous)
        os.close(read_fd)


def _wait(pid: int, timeout: float | None, every: float, heartbeat: Callable[[], None]) -> tuple[int, bool]:
    """(wait status, whether the child was killed for its execution timeout)."""
    pidfd = os.pidfd_open(pid)
    deadline = None if timeout is None else time.monotonic() + timeout
    next_beat = time.monotonic() + every
    try:
        while True:
            until = next_beat if deadline is None else min(next_beat, deadline)
            ready, _, _ = select.select([pidfd], [], [], max(0.0, until - time.monotonic()))
            if ready:
                return os.waitpid(pid, 0)[1], False
            if deadline is not None and time.monotonic() >= deadline:
                _kill_group(pid)
                return os.waitpid(pid, 0)[1], True
            if time.monotonic() >= next_beat:
                heartbeat()
                next_beat += every
    finally:
        os.close(pidfd)


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except ProcessLookupError:
            pass


def _outcome(status: int, timed_out: bool, timeout: float | None, report: dict) -> Outcome:
    if timed_out:
        return Outcome(False, f"execution timeout: still running after {timeout:g} s, killed")
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return Outcome(True)
    if report:
        return Outcome(False, report.get("error", "the task failed"), report.get("traceback", ""))
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return Outcome(False, f"user code killed by signal {name} ({os.WTERMSIG(status)})")
    return Outcome(False, f"user code exited with code {os.WEXITSTATUS(status)}")


def _read_report(read_fd: int) -> dict:
    os.set_blocking(read_fd, False)
    try:
        data = os.read(read_fd, 1 << 20)
    except BlockingIOError:
        return {}
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {"error": data.decode(errors="replace")[:2000]}
