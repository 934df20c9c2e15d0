"""Parser children: fork one per file, read its result concurrently, reap it.

A child reports over a pipe in plain data (``report``: a length, then JSON with the
definitions in Tock's Avro encoding); the parent never unpickles anything a child
wrote, and stops reading past the report size limit. It reads the pipe whenever it is
readable, so a child never blocks on a full pipe (and the parse deadline, enforced on
every turn, applies while it reads), and watches a pidfd for the child's exit. The
child's stdin/stdout/stderr are /dev/null: a file that prints megabytes costs nothing.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
from collections.abc import Callable

from services.dag_processor.core import ParseResult
from services.dag_processor.report import LENGTH, MAX_REPORT, encode_report, read_report

_CHUNK = 1 << 20
_READ_LIMIT = LENGTH.size + MAX_REPORT  # bytes read from one child at most
_MAX_FD = 1 << 16
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded once in the parent; children inherit it


class ChildHandle:
    """The parent's end of one child: its pid, a pidfd and the read end of its result pipe."""

    def __init__(self, pid: int, pidfd: int, result_fd: int) -> None:
        self.pid = pid
        self._pidfd: int | None = pidfd
        self._result_fd: int | None = result_fd
        self._received = bytearray()
        self._overflowed = False  # it sent more than _READ_LIMIT: the pipe was closed, the parse failed
        self.exit_code: int | None = None

    def watched_fds(self) -> list[int]:
        """Descriptors to poll: the result pipe until EOF, the pidfd until the child is reaped."""
        return [fd for fd in (self._result_fd, self._pidfd if self.exit_code is None else None) if fd is not None]

    def on_ready(self, fd: int) -> None:
        """Read what the child sent, or reap it if it exited."""
        if fd == self._result_fd:
            self._read_once()
        elif fd == self._pidfd and self.exit_code is None:
            self._reap(os.WNOHANG)
            if self.exit_code is not None:
                self._drain()

    @property
    def exited(self) -> bool:
        return self.exit_code is not None

    def result(self) -> ParseResult | None:
        """The child's result (an error result if its report is malformed or too large),
        or None if it sent nothing or was cut short."""
        if self._overflowed:
            return ParseResult("", error=f"the parser sent more than {MAX_REPORT:,} bytes of report, "
                                         "over the limit; the rest was not read")
        return read_report(bytes(self._received))

    def release(self) -> None:
        """Kill the child if it still runs, reap it and close every descriptor. Idempotent."""
        if self.exit_code is None and self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:  # already exited, not yet reaped: reaped just below
                pass
        if self.exit_code is None:
            self._reap(0)
        for fd in (self._result_fd, self._pidfd):
            if fd is not None:
                os.close(fd)
        self._result_fd = self._pidfd = None

    def _read_once(self) -> None:
        try:
            chunk = os.read(self._result_fd, _CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self._close_result()
            return
        self._received += chunk
        if len(self._received) > _READ_LIMIT:
            # Read no further (a child writing more then gets EPIPE and exits); the parse failed.
            self._overflowed = True
            self._received = bytearray()
            self._close_result()

    def _close_result(self) -> None:
        os.close(self._result_fd)
        self._result_fd = None

    def _drain(self) -> None:
        # The child is gone: what it wrote is all in the pipe (or it never closes if a
        # grandchild inherited the write end; then we stop at "nothing more now").
        while self._result_fd is not None:
            before = len(self._received)
            self._read_once()
            if self._result_fd is not None and len(self._received) == before:
                return

    def _reap(self, options: int) -> None:
        pid, status = os.waitpid(self.pid, options)
        if pid == self.pid:
            self.exit_code = os.waitstatus_to_exitcode(status)


def fork_parser(parse: Callable[[], ParseResult], prepare_child: Callable[[], None], *,
                fork: Callable[[], int] = os.fork) -> ChildHandle:
    """Fork a child that runs ``parse`` and sends its result; returns the parent's handle.

    If ``fork`` fails (out of processes or memory) the error propagates and both ends of
    the result pipe are closed: a fork failing on every turn leaks nothing."""
    read_fd, write_fd = os.pipe()
    parent_pid = os.getpid()
    try:
        pid = fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
        _child_main(parse, prepare_child, parent_pid, (read_fd, write_fd))
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.close(read_fd)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return ChildHandle(pid, pidfd, read_fd)


def _child_main(parse, prepare_child, parent_pid: int, pipe: tuple[int, int]):  # pragma: no cover - child
    read_fd, write_fd = pipe
    code = 1
    try:
        # The manager's heap is not the parser's to collect: a collection would walk it and, its pages being
        # shared with the manager, copy them (as a try's child does: services/runner/supervise.py).
        gc.freeze()
        os.close(read_fd)
        _die_with_parent(parent_pid)
        _isolate(write_fd)
        prepare_child()
        _write_all(write_fd, encode_report(parse()))
        code = 0
    finally:
        os._exit(code)


def _die_with_parent(parent_pid: int) -> None:
    """A processor killed with SIGKILL must not leave a hanging parse behind."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _isolate(keep_fd: int) -> None:
    """Default signals, stdio to /dev/null, no descriptor of the parent but the result pipe.

    SIGINT is ignored: a Ctrl-C in a terminal reaches the whole process group, and the
    processor itself stops its children (as a shutdown, not as crashes)."""
    for signum in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, _MAX_FD)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - fresh unbuffered-state streams
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
