"""Masking: every registered secret is replaced by ``***`` in what a try writes to its log.

``mask_secret(value)`` (Airflow's name) registers a value with the process's masker; reading a
connection registers its password (and its extra's values under sensitive keys), reading a
variable whose key holds a sensitive word registers its value. Values shorter than MIN_LENGTH are
not masked (as Airflow's ``min_length_masked_secret``): masking "a" would garble every line.

A try's output goes through :func:`masked_output`: a pipe whose reader (a thread, or a forked process
that outlives an exec or a crash of the try) writes the masked bytes to the log. The reader holds back
only the longest tail that could begin a secret (so a secret written in pieces, or across lines, is
still masked whole) and writes the rest at once.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import threading
from collections.abc import Callable, Iterable
from typing import Any

REPLACEMENT = "***"
MIN_LENGTH = 5
# Airflow's sensitive words: a variable or extra key holding one of them is a secret.
SENSITIVE_WORDS = ("access_token", "api_key", "apikey", "authorization", "passphrase", "passwd", "password",
                   "private_key", "secret", "token", "keyfile_dict", "service_account")
READ_SIZE = 65536


def is_sensitive(name: str) -> bool:
    """Whether a variable or field name names a secret (holds one of SENSITIVE_WORDS, any case)."""
    lowered = name.lower()
    return any(word in lowered for word in SENSITIVE_WORDS)


class Masker:
    """The set of secrets to mask, and masking of text and bytes. Thread-safe."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self._listeners: list[Callable[[str], None]] = []

    def add(self, secret: Any) -> None:
        """Register ``secret``: a text, or every text inside a dict, list or tuple."""
        found = set(_texts(secret))
        forms = found | {json.dumps(text)[1:-1] for text in found}  # as it appears inside JSON
        forms = {form for form in forms if len(form) >= MIN_LENGTH} - self._secrets
        if not forms:
            return
        with self._lock:
            self._secrets |= forms
            ordered = sorted(self._secrets, key=len, reverse=True)  # the longest wins where several match
            self._text = re.compile("|".join(re.escape(text) for text in ordered))
            self._bytes = re.compile(b"|".join(re.escape(text.encode()) for text in ordered))
            listeners = list(self._listeners)
        for listener in listeners:  # a reader process masking this process's output (masked_output)
            for form in sorted(forms):
                listener(form)

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(secret)`` for each secret registered from now on."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe_all(self) -> None:
        with self._lock:
            self._listeners.clear()

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def mask(self, text: str) -> str:
        """``text`` with every registered secret replaced by ``***``."""
        pattern = self._text
        return text if pattern is None else pattern.sub(REPLACEMENT, text)

    def mask_bytes(self, data: bytes) -> bytes:
        pattern = self._bytes
        return data if pattern is None else pattern.sub(REPLACEMENT.encode(), data)

    def stream(self) -> MaskingStream:
        return MaskingStream(self)

    def _encoded(self) -> tuple[re.Pattern[bytes] | None, tuple[bytes, ...]]:
        with self._lock:
            return self._bytes, tuple(text.encode() for text in self._secrets)


class MaskingStream:
    """Masks a byte stream fed in pieces: :meth:`feed` returns what is safe to write now, :meth:`close`
    the rest. A secret split across feeds, or across lines, is masked whole."""

    def __init__(self, masker: Masker) -> None:
        self._masker = masker
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        buffer = self._held + data
        pattern, secrets = self._masker._encoded()
        if pattern is None:
            self._held = b""
            return buffer
        cut = len(buffer) - _longest_secret_start(buffer, secrets)
        for match in pattern.finditer(buffer):  # a whole secret across the cut is written whole
            if match.start() < cut < match.end():
                cut = match.end()
        self._held = buffer[cut:]
        return pattern.sub(REPLACEMENT.encode(), buffer[:cut])

    def close(self) -> bytes:
        rest, self._held = self._held, b""
        return self._masker.mask_bytes(rest)


def _longest_secret_start(buffer: bytes, secrets: Iterable[bytes]) -> int:
    """The length of the longest tail of ``buffer`` that is a proper start of a secret."""
    longest = 0
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(buffer)), longest, -1):
            if buffer.endswith(secret[:size]):
                longest = size
                break
    return longest


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _texts(item)


def masked_output(log_fd: int, masker: Masker, *, survive_exec: bool = False) -> tuple[int, Callable[[], None]]:
    """A pipe to write a try's output into: ``(write_fd, finish)``. What is written to ``write_fd`` (and
    its copies, e.g. dup2'ed onto 1 and 2) reaches ``log_fd`` masked. ``finish()`` points this process's
    copies (stdout, stderr, write_fd) at /dev/null, waits until the reader has written everything
    (at most FINISH_TIMEOUT seconds: a leftover grandchild may hold the pipe open) and returns.

    The reader is a thread, or with ``survive_exec`` a forked process, which outlives an ``execve`` of
    this process (a bash task) and a crash (a segfault's traceback from faulthandler still reaches the
    log). Either masks the secrets registered later too: the process is sent each one over a second
    pipe, and reads it before the output written after it."""
    read_fd, write_fd = os.pipe()
    pipe = os.fstat(write_fd)
    if survive_exec:
        wait = _reader_process(read_fd, write_fd, log_fd, masker)
    else:
        thread = threading.Thread(target=_copy_masked, args=(read_fd, log_fd, masker), name="tock-masking",
                                  daemon=True)
        thread.start()
        wait = lambda: thread.join(FINISH_TIMEOUT)  # noqa: E731

    def finish() -> None:
        _release(write_fd, pipe)
        wait()

    return write_fd, finish


FINISH_TIMEOUT = 10.0
_LENGTH = struct.Struct("!I")


def _copy_masked(read_fd: int, log_fd: int, masker: Masker, control_fd: int | None = None) -> None:
    """Copy ``read_fd`` to ``log_fd`` masked until its end; secrets sent over ``control_fd`` (framed by
    :func:`_send_secret`) are registered before each chunk of output is masked."""
    stream, control = masker.stream(), _Control(control_fd, masker)
    try:
        while True:
            control.wait_for(read_fd)
            chunk = os.read(read_fd, READ_SIZE)
            control.drain()  # every secret sent before this output was written is in the pipe by now
            if not chunk:
                break
            _write_all(log_fd, stream.feed(chunk))
        _write_all(log_fd, stream.close())
    finally:
        os.close(read_fd)
        control.close()


class _Control:
    """The reader process's end of the secrets pipe (none for a thread: it shares the masker)."""

    def __init__(self, fd: int | None, masker: Masker) -> None:
        self.fd, self.masker, self.pending = fd, masker, b""
        if fd is not None:
            os.set_blocking(fd, False)

    def wait_for(self, read_fd: int) -> None:
        while self.fd is not None:
            ready, _, _ = select.select([read_fd, self.fd], [], [])
            if read_fd in ready:
                return
            self.drain()

    def drain(self) -> None:
        while self.fd is not None:
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                return
            if not data:  # the writer exec'ed or ended: no more secrets can come
                self.close()
                return
            self._take(data)

    def _take(self, data: bytes) -> None:
        self.pending += data
        while len(self.pending) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self.pending)
            if len(self.pending) < _LENGTH.size + size:
                return
            self.masker.add(self.pending[_LENGTH.size:_LENGTH.size + size].decode())
            self.pending = self.pending[_LENGTH.size + size:]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _reader_process(read_fd: int, write_fd: int, log_fd: int, masker: Masker) -> Callable[[], None]:
    control_read, control_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the reader: never returns
        code = 1
        try:
            masker.unsubscribe_all()  # what an earlier reader was sent is not this one's
            os.close(write_fd)
            os.close(control_write)
            _copy_masked(read_fd, log_fd, masker, control_read)
            code = 0
        finally:
            os._exit(code)
    os.close(read_fd)
    os.close(control_read)
    masker.subscribe(lambda secret: _send_secret(control_write, secret))

    def wait() -> None:
        masker.unsubscribe_all()
        try:
            os.close(control_write)
        except OSError:
            pass
        os.waitpid(pid, 0)

    return wait


def _send_secret(control_fd: int, secret: str) -> None:
    data = secret.encode()
    try:
        _write_all(control_fd, _LENGTH.pack(len(data)) + data)
    except OSError:  # the reader is gone: nothing left to mask for
        pass


def _release(write_fd: int, pipe: os.stat_result) -> None:
    """Close every copy of the pipe's write end this process holds among 0-2 (pointed at /dev/null) and
    ``write_fd`` itself, unless the caller closed it already (after dup2'ing it onto 1 and 2)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (0, 1, 2):
            if _is_pipe(fd, pipe):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    if _is_pipe(write_fd, pipe):
        os.close(write_fd)


def _is_pipe(fd: int, pipe: os.stat_result) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), pipe)
    except OSError:  # closed
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
