"""Supervising the children: heartbeats while they run, execution timeouts, and how each ended.

A runner may supervise several tries at once (a batch launched together), each try's user
code in its own child; one child's end never disturbs the others.
"""

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
from services.runner.watcher import GroupWatcher


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str = ""
    traceback: str = ""


@dataclass(frozen=True, slots=True)
class Child:
    """A forked child running one try's user code: the leader of its process group."""

    request: TryRequest
    pid: int
    pidfd: int     # readable once the child has ended
    report_fd: int  # where the child reports an exception
    deadline: float | None  # time.monotonic() past which it is killed


def start_child(request: TryRequest, log_path: str, watcher: GroupWatcher) -> Child:
    """Fork the child that runs the try's user code, in a process group the watcher kills if the runner dies."""
    read_fd, write_fd = os.pipe()
    runner = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _enter_group(watcher, runner)
        run_child(request, log_path, write_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # here too, so a kill of the group right after the fork finds it
    except OSError:  # the child did it first, or has ended already
        pass
    timeout = request.execution_timeout
    return Child(request, pid, os.pidfd_open(pid), read_fd, None if timeout is None else time.monotonic() + timeout)


def _enter_group(watcher: GroupWatcher, runner: int) -> None:
    try:
        os.setpgid(0, 0)  # its own group, so a timeout or the watcher kills whatever the task started too
        watcher.enroll(runner)
    except BaseException:  # noqa: BLE001 - no user code runs unwatched
        os._exit(1)


def supervise(request: TryRequest, log_path: str, heartbeat_seconds: float,
              heartbeat: Callable[[], None]) -> Outcome:
    """Fork the child, heartbeat every ``heartbeat_seconds`` until it ends, and say how it ended."""
    outcomes: list[Outcome] = []
    supervise_all([(request, log_path)], heartbeat_seconds, lambda _running: heartbeat(),
                  lambda _request, outcome: outcomes.append(outcome))
    return outcomes[0]


def supervise_all(tries: list[tuple[TryRequest, str]], heartbeat_seconds: float,
                  heartbeat: Callable[[list[TryRequest]], None],
                  ended: Callable[[TryRequest, Outcome], None], watcher: GroupWatcher | None = None) -> None:
    """Fork a child per try (request, log path); every ``heartbeat_seconds`` call ``heartbeat`` with
    the tries still running, and call ``ended(request, outcome)`` as each ends. ``watcher``: one
    started earlier (a warm runner's; it stays open), else one of its own for these tries."""
    own_watcher = watcher is None
    supervision = _Supervision(heartbeat_seconds, heartbeat, ended, watcher or GroupWatcher.start())
    # A runner told to stop takes its user code with it, then reports the tries failed.
    previous = signal.signal(signal.SIGTERM, supervision.stop)
    try:
        for request, log_path in tries:
            supervision.start(request, log_path)
        supervision.watch()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if own_watcher:
            supervision.watcher.close()


class _Supervision:
    """The running children of one runner, by pidfd."""

    def __init__(self, heartbeat_seconds: float, heartbeat: Callable[[list[TryRequest]], None],
                 ended: Callable[[TryRequest, Outcome], None], watcher: GroupWatcher) -> None:
        self.every, self.heartbeat, self.ended, self.watcher = heartbeat_seconds, heartbeat, ended, watcher
        self.running: dict[int, Child] = {}
        self.stopping = False

    def start(self, request: TryRequest, log_path: str) -> None:
        if self.stopping:
            self.ended(request, Outcome(False, "the runner was stopped before the user code started"))
            return
        child = start_child(request, log_path, self.watcher)
        self.running[child.pidfd] = child

    def stop(self, *_signal) -> None:
        self.stopping = True
        for child in list(self.running.values()):
            _kill_group(child.pid)

    def watch(self) -> None:
        """Until every child ended: reap the ended, kill the overdue, heartbeat the others."""
        next_beat = time.monotonic() + self.every
        while self.running:
            until = min([next_beat, *(child.deadline for child in self._timed())])
            ready, _, _ = select.select(list(self.running), [], [], max(0.0, until - time.monotonic()))
            for pidfd in ready:
                self._end(self.running[pidfd], timed_out=False)
            now = time.monotonic()
            for child in [child for child in self._timed() if now >= child.deadline]:
                _kill_group(child.pid)
                self._end(child, timed_out=True)
            if self.running and time.monotonic() >= next_beat:
                self.heartbeat([child.request for child in self.running.values()])
                next_beat += self.every

    def _timed(self) -> list[Child]:
        return [child for child in self.running.values() if child.deadline is not None]

    def _end(self, child: Child, timed_out: bool) -> None:
        del self.running[child.pidfd]
        outcome = _finish(child, timed_out)
        self.watcher.ended(child.pid)
        self.ended(child.request, outcome)


def _finish(child: Child, timed_out: bool) -> Outcome:
    """Reap the child and say how it ended."""
    try:
        status = os.waitpid(child.pid, 0)[1]
        return _outcome(status, timed_out, child.request.execution_timeout, _read_report(child.report_fd))
    finally:
        os.close(child.pidfd)
        os.close(child.report_fd)


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
