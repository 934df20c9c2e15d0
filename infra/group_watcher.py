"""The group watcher: a process forked once per runner that kills its tries' process groups when it dies.

Shared by the runner (services/runner: each try's user code), the node agent
(services/node_agent: each pod's process tree) and, for ``die_with_parent``, the Celery worker
(services/worker: its resident runners and presence process), so it lives here, once.

Each try's user code leads a process group holding everything it starts. The runner
dies however it dies (kill -9, OOM): the kernel closes its end of a pipe to the watcher,
the watcher reads end of file and kills every group still enrolled. One watcher per
runner, forked before the tries arrive, keeps a try's start and end as cheap as one fork
(a guardian process per try cost a second fork of the runner on every try: W1 took a
third longer). The user code's own process also dies with the runner (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


class GroupWatcher:
    """The runner's side: enroll each try's group (from the try's child), let it go once reaped."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid, self._pipe = pid, pipe

    @classmethod
    def start(cls) -> GroupWatcher:
        """Fork the watcher; only this process holds the pipe's write end (close-on-exec)."""
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _watch(read_end)
        os.close(read_end)
        return cls(pid, write_end)

    def enroll(self, runner_pid: int) -> None:
        """In a try's child, before any user code: die with the runner, enroll this process's group."""
        die_with_parent(signal.SIGKILL, runner_pid)
        os.write(self._pipe, f"+{os.getpgid(0)}\n".encode())
        os.close(self._pipe)  # else the runner's death would not reach the watcher while the try runs

    def ended(self, group: int) -> None:
        """The try whose group this is was reaped: what is left of it is no longer the watcher's."""
        os.write(self._pipe, f"-{group}\n".encode())

    def adopt(self, group: int) -> None:
        """From the watcher's owner: enroll a group it did not fork itself (a node agent's pod,
        started in its own session or found again after a restart)."""
        os.write(self._pipe, f"+{group}\n".encode())

    def release(self, group: int) -> None:
        """Let a group go alive: the owner stops cleanly and means it to outlive it (a node agent
        on SIGTERM releases its pods, so a restarted agent finds them running)."""
        self.ended(group)

    def close(self) -> None:
        """The runner is done: the watcher reads end of file, kills nothing left enrolled, and is reaped."""
        os.close(self._pipe)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped already (a host process that ignores SIGCHLD)
            pass


def die_with_parent(signum: int, parent_pid: int) -> None:
    """Ask the kernel for ``signum`` when the parent dies; if it died already, take it now."""
    if _libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
        os.kill(os.getpid(), signum)


def enrolled_after(lines: list[bytes], groups: set[int]) -> set[int]:
    """The groups enrolled once ``+group`` / ``-group`` lines are applied in order."""
    groups = set(groups)
    for line in lines:
        (groups.add if line.startswith(b"+") else groups.discard)(int(line[1:]))
    return groups


def _watch(read_end: int) -> None:
    """The watcher process: follow enrolments until end of file, then kill what is enrolled. Never returns."""
    try:
        # Its own group, deaf to hang-ups and interrupts: only the runner's end (end of file) ends it.
        os.setpgid(0, 0)
        for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        groups, pending = set(), b""
        while chunk := os.read(read_end, 4096):
            *lines, pending = (pending + chunk).split(b"\n")
            groups = enrolled_after(lines, groups)
        for group in groups:
            _kill_group(group)
    finally:
        os._exit(0)


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:  # everything in it ended already
        pass
