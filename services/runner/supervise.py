"""Supervising the children: heartbeats while they run, execution timeouts, kill requests, and how
each ended.

A runner may supervise several tries at once (a batch launched together), each try's user
code in its own child; one child's end (or kill) never disturbs the others. The supervision
wakes up at least every KILL_CHECK_SECONDS to ask, without waiting, which of its tries the
log asks it to stop; it kills such a try's process group and reports the try killed.
It reads each child's report (child.py) as it comes, beside waiting for its end: a report larger
than a pipe's buffer never leaves a child blocked in its write while the runner heartbeats.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from infra.executors.requests import TryRequest
from infra.group_watcher import GroupWatcher
from infra.task_environment import TaskEnvironment
from services.runner.child import ERROR_LIMIT, ChildSetup, cut_to_first, run_child
from services.runner.core.claim import TryKey

KILL_CHECK_SECONDS = 0.5  # how often, at least, the supervision looks for kill requests
# Bytes of a child's report kept at most: above what the child writes (child.py: an error and its traceback
# under 40 KB, or a success's values, at most 8 MiB as TOCK_XCOM_MAX_BYTES allows, escaped once more as a JSON
# string, and its rendered fields). Past it the rest is read and dropped, so the child never blocks, and a
# success whose report is cut fails saying so: a value is never lost silently.
REPORT_LIMIT_BYTES = 32 << 20

KillRequests = Callable[[], Mapping[TryKey, str]]  # the tries asked to stop so far -> why; never waits


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str = ""  # for a killed try: the kill request's reason
    traceback: str = ""
    retryable: bool = True  # False: its user code raised AirflowFailException (TaskFailed.retryable)
    killed: bool = False  # its user code was killed as the log asked
    values_json: str = ""    # what a succeeded try passes on (TaskSucceeded.values_json)
    rendered_json: str = ""  # its templated fields as rendered
    accessed: tuple[tuple[str, str, str], ...] = ()  # (kind, name, backend) of each secret its user code read
    follow: tuple[str, ...] | None = None  # what a succeeded branch or short circuit follows (None: no choice)
    skipped: bool = False  # its user code raised the skip exception: not succeeded, not failed either
    reason: str = ""       # a skipped try's reason
    poked: bool = False    # a sensor's poke found its condition not met (TaskPoked)
    reschedule_at: float | None = None  # when the poke asked to be poked again
    poke_timed_out: bool = False  # a sensor in mode "poke" waited its timeout in the try
    asset_events_json: str = ""  # a succeeded try's asset events (TaskSucceeded.asset_events_json)
    commands: tuple[dict[str, Any], ...] = ()  # commands to append before its success (TriggerDagRunOperator)
    output: tuple[Any, ...] = ()  # [topic, key, value] (base64) written with its success (tock/kafka_output.py)

    @property
    def ended_well(self) -> bool:
        """Succeeded, skipped or poked: the runner's exit code is 0."""
        return self.succeeded or self.skipped or self.poked


def no_kill_requests() -> Mapping[TryKey, str]:
    return {}


@dataclass(frozen=True, slots=True)
class Child:
    """A forked child running one try's user code: the leader of its process group."""

    request: TryRequest
    pid: int
    pidfd: int     # readable once the child has ended
    report_fd: int  # where the child reports an exception (non-blocking; read as it comes)
    deadline: float | None  # time.monotonic() past which it is killed
    report: bytearray = field(default_factory=bytearray)  # what it reported so far

    def read_report(self) -> bool:
        """Read what the child has written of its report so far; False once it closed its end. A few
        pipe buffers at most per call, so a writer that never stops cannot starve the heartbeats."""
        for _chunk in range(16):
            try:
                data = os.read(self.report_fd, 1 << 16)
            except BlockingIOError:
                return True
            if not data:
                return False
            self.report.extend(data[:max(0, REPORT_LIMIT_BYTES - len(self.report))])
        return True


def start_child(request: TryRequest, log_path: str, watcher: GroupWatcher, setup: ChildSetup) -> Child:
    """Fork the child that runs the try's user code, in a process group the watcher kills if the runner dies,
    with the variables ``setup.environment`` passes and the try's recorded context."""
    read_fd, write_fd = os.pipe()
    runner = os.getpid()
    pid = os.fork()
    if pid == 0:
        # The runner's heap is never the child's garbage: frozen out of its collections (O(1)). Else a
        # collection in the child walks every inherited object and writes its header, copying most of the
        # runner's memory page by page: W1's no-op tries spent half their CPU there (14 s of it, 7 s after).
        gc.freeze()
        os.close(read_fd)
        _enter_group(watcher, runner)
        run_child(request, log_path, write_fd, setup)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
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


def supervise(request: TryRequest, log_path: str, heartbeat_seconds: float, heartbeat: Callable[[], None],
              environment: TaskEnvironment | None = None) -> Outcome:
    """Fork the child, heartbeat every ``heartbeat_seconds`` until it ends, and say how it ended."""
    outcomes: list[Outcome] = []
    supervise_all([(request, log_path)], heartbeat_seconds, lambda _running: heartbeat(),
                  lambda _request, outcome: outcomes.append(outcome),
                  setup=ChildSetup(environment or TaskEnvironment.default()))
    return outcomes[0]


def supervise_all(tries: list[tuple[TryRequest, str]], heartbeat_seconds: float,
                  heartbeat: Callable[[list[TryRequest]], None],
                  ended: Callable[[TryRequest, Outcome], None], watcher: GroupWatcher | None = None,
                  kill_requests: KillRequests = no_kill_requests, *,
                  setup: ChildSetup | None = None) -> None:
    """Fork a child per try (request, log path); every ``heartbeat_seconds`` call ``heartbeat`` with
    the tries still running, and call ``ended(request, outcome)`` as each ends. ``watcher``: one
    started earlier (a warm runner's; it stays open), else one of its own for these tries.
    ``kill_requests()``: the tries the log asks to stop (try -> reason); a try named there is killed,
    or not started, and ends killed. ``setup``: what the children start from (default: the default
    settings' allow-list and limits, no recorded contexts)."""
    own_watcher = watcher is None
    supervision = _Supervision(heartbeat_seconds, heartbeat, ended, watcher or GroupWatcher.start(), kill_requests,
                               setup or ChildSetup(TaskEnvironment.default()))
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
                 ended: Callable[[TryRequest, Outcome], None], watcher: GroupWatcher,
                 kill_requests: KillRequests, setup: ChildSetup) -> None:
        self.every, self.heartbeat, self.ended, self.watcher = heartbeat_seconds, heartbeat, ended, watcher
        self.kill_requests, self.setup = kill_requests, setup
        self.running: dict[int, Child] = {}  # by pidfd
        self.reporting: dict[int, Child] = {}  # by report_fd: children whose report pipe is still open
        self.stopping = False

    def start(self, request: TryRequest, log_path: str) -> None:
        if self.stopping:
            self.ended(request, Outcome(False, "the runner was stopped before the user code started"))
            return
        reason = self.kill_requests().get(request.key)
        if reason is not None:  # asked to stop before its user code started: it never starts
            self.ended(request, Outcome(False, reason, killed=True))
            return
        child = start_child(request, log_path, self.watcher, self.setup)
        self.running[child.pidfd] = child
        self.reporting[child.report_fd] = child

    def stop(self, *_signal) -> None:
        self.stopping = True
        for child in list(self.running.values()):
            _kill_group(child.pid)

    def watch(self) -> None:
        """Until every child ended: reap the ended, kill the overdue and those the log asks to stop,
        heartbeat the others."""
        next_beat = time.monotonic() + self.every
        while self.running:
            deadlines = [child.deadline for child in self._timed()]
            until = min([next_beat, time.monotonic() + KILL_CHECK_SECONDS, *deadlines])
            ready, _, _ = select.select([*self.running, *self.reporting], [], [],
                                        max(0.0, until - time.monotonic()))
            for report_fd in [fd for fd in ready if fd in self.reporting]:
                if not self.reporting[report_fd].read_report():
                    del self.reporting[report_fd]
            for pidfd in [fd for fd in ready if fd in self.running]:
                self._end(self.running[pidfd])
            self._kill_overdue()
            self._obey_kill_requests()
            if self.running and time.monotonic() >= next_beat:
                self.heartbeat([child.request for child in self.running.values()])
                next_beat += self.every

    def _timed(self) -> list[Child]:
        return [child for child in self.running.values() if child.deadline is not None]

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for child in [child for child in self._timed() if now >= child.deadline]:
            _kill_group(child.pid)
            self._end(child, timed_out=True)

    def _obey_kill_requests(self) -> None:
        requested = self.kill_requests()
        for child in [child for child in self.running.values() if child.request.key in requested]:
            _kill_group(child.pid)
            self._end(child, kill_reason=requested[child.request.key])

    def _end(self, child: Child, timed_out: bool = False, kill_reason: str | None = None) -> None:
        del self.running[child.pidfd]
        self.reporting.pop(child.report_fd, None)
        outcome = _finish(child, timed_out, kill_reason, self.stopping)
        self.watcher.ended(child.pid)
        self.ended(child.request, outcome)


STOPPED = "the runner was told to stop (SIGTERM: the try was revoked, or its worker or runner shut down)"


def _finish(child: Child, timed_out: bool, kill_reason: str | None, stopping: bool = False) -> Outcome:
    """Reap the child and say how it ended."""
    try:
        status = os.waitpid(child.pid, 0)[1]
        if kill_reason is not None and _killed(status):
            return Outcome(False, kill_reason, killed=True)
        if stopping and _killed(status):
            return Outcome(False, STOPPED)
        # else it had ended by itself before the kill: its own outcome stands
        child.read_report()  # the rest of it: the child has ended
        report = _parsed_report(bytes(child.report))
        outcome = _outcome(status, timed_out, child.request.execution_timeout, report)
        return replace(outcome, accessed=_accesses(report))
    finally:
        os.close(child.pidfd)
        os.close(child.report_fd)


def _killed(status: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except ProcessLookupError:
            pass


def _outcome(status: int, timed_out: bool, timeout: float | None, report: dict) -> Outcome:
    rendered = str(report.get("rendered", ""))
    if timed_out:
        return Outcome(False, f"execution timeout: still running after {timeout:g} s, killed", rendered_json=rendered)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        if "error" in report:  # its report did not read back whole: what it passed on is unknown
            return Outcome(False, f"the try's report could not be read ({report['error'][:200]})")
        return _ran_to_its_end(report, rendered)
    if "error" in report:
        return Outcome(False, report["error"], report.get("traceback", ""), rendered_json=rendered,
                       retryable=report.get("retryable") is not False)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return Outcome(False, f"user code killed by signal {name} ({os.WTERMSIG(status)})", rendered_json=rendered)
    return Outcome(False, f"user code exited with code {os.WEXITSTATUS(status)}", rendered_json=rendered)


def _ran_to_its_end(report: dict, rendered: str) -> Outcome:
    """A child that reported and exited 0: succeeded, with what it follows, or skipped, with why."""
    values = str(report.get("values", ""))
    if "skipped" in report:
        return Outcome(False, values_json=values, rendered_json=rendered, skipped=True, reason=str(report["skipped"]))
    if "poked" in report:
        return _poked(report["poked"], rendered)
    follow = report.get("follow")
    if follow is not None and not (isinstance(follow, list) and all(isinstance(item, str) for item in follow)):
        return Outcome(False, f"the try's report has a follow that is not a list of task ids: {follow!r:.200}")
    return Outcome(True, values_json=values, rendered_json=rendered,
                   follow=None if follow is None else tuple(follow), asset_events_json=str(report.get("assets", "")),
                   commands=tuple(item for item in report.get("commands") or () if isinstance(item, dict)),
                   output=tuple(report.get("output") or ()))


def _poked(poked: Any, rendered: str) -> Outcome:
    """A sensor's try whose condition was not met, as its report says."""
    asked = poked.get("reschedule_at") if isinstance(poked, dict) else None
    if not isinstance(poked, dict) or not (asked is None or isinstance(asked, int | float)):
        return Outcome(False, f"the try's report has a poke that is not understood: {poked!r:.200}")
    return Outcome(False, rendered_json=rendered, poked=True, reschedule_at=None if asked is None else float(asked),
                   poke_timed_out=bool(poked.get("timed_out")))


def _accesses(report: dict) -> tuple[tuple[str, str, str], ...]:
    found = report.get("accessed")
    if not isinstance(found, list):
        return ()
    return tuple((str(kind), str(name), str(backend)) for kind, name, backend in
                 (item for item in found if isinstance(item, list) and len(item) == 3))


def _parsed_report(data: bytes) -> dict:
    try:
        return json.loads(data) if data else {}
    except ValueError:  # cut at REPORT_LIMIT_BYTES, or not written by child.py
        return {"error": cut_to_first(data.decode(errors="replace"), ERROR_LIMIT)}
