"""The guardian: the forked child between the runner and one try's user code.

It leads a process group that holds the user code and everything the user code starts.
When the runner dies however it dies (kill -9, OOM), the kernel sends the guardian
RUNNER_GONE (PR_SET_PDEATHSIG) and the guardian kills its whole group; the user code
cannot outlive its supervision. Otherwise it waits for the user code and ends exactly as
it ended (same exit code, or the same signal), so the runner reads the user code's end
from the guardian's.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Callable
from typing import NoReturn

PR_SET_PDEATHSIG = 1
RUNNER_GONE = signal.SIGHUP  # "the runner hung up"; the guardian's own group never has a terminal

_libc = ctypes.CDLL(None, use_errno=True)


def guard(user_code: Callable[[], NoReturn], runner_pid: int) -> NoReturn:
    """Runs in the child forked by the runner; never returns."""
    try:
        os.setpgid(0, 0)  # the group leader, so a kill of the group (timeout, stop) takes everything
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(RUNNER_GONE, _kill_group)
        die_with_parent(RUNNER_GONE, runner_pid)
        guardian = os.getpid()
        pid = os.fork()
        if pid == 0:
            _run_user_code(user_code, guardian)
        mirror(os.waitpid(pid, 0)[1])
    finally:
        os._exit(1)


def die_with_parent(signum: int, parent_pid: int) -> None:
    """Ask the kernel for ``signum`` when the parent dies; if it died already, take it now."""
    if _libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
        os.kill(os.getpid(), signum)


def mirror(status: int) -> NoReturn:
    """End this process as the process with wait ``status`` ended: same exit code, or same signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        # Whatever core the user code dumped was its own; the guardian must not add a second.
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # not reached for a signal that ends a process
    os._exit(os.waitstatus_to_exitcode(status))


def _run_user_code(user_code: Callable[[], NoReturn], guardian_pid: int) -> NoReturn:
    try:
        signal.signal(RUNNER_GONE, signal.SIG_DFL)
        # Should the guardian die alone (killed by pid), the user code goes with it.
        die_with_parent(signal.SIGKILL, guardian_pid)
        user_code()
    finally:
        os._exit(1)


def _kill_group(*_signal: object) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the guardian too: the runner is gone, nobody reports
