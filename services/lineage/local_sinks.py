"""The file and HTTP sinks of ``tock lineage``: openlineage-python's FileTransport and HttpTransport, each with
what it has delivered kept where a restart finds it.

File: exactly once. The file is its own record of progress: every line is one event, and its ``tock`` run facet
names the record of tock.events it comes from (partition, offset, index), which grows in the log's order per
partition. On start the emitter cuts a last line that a kill left unfinished (no newline), reads the position of
the last event of each partition, and emits only what comes after it. One emitter per file: a lock beside it
(``<file>.lock``, flock) refuses a second one, and is released by the kernel when its holder dies, even by
``kill -9``. Lines are flushed to the operating system before the next batch is read and fsync'ed after each
batch; a machine that loses power may lose the batch written last (it is emitted again on start: nothing is
doubled, as the position check runs on what the file holds).

HTTP: at least once, never lost, never reordered. An event is sent again until the endpoint accepts it (2xx);
what was accepted is recorded (``<home>/lineage/http-<name>.json``, replaced atomically) after each acceptance.
An emitter killed between an acceptance and that record sends that event again on start: the same bytes, so a
receiver that deduplicates on (runId, eventType, eventTime), which identifies the state change, sees it once.
Exactly once is impossible here: the receiver's acceptance and our record of it cannot be one atomic step.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import BinaryIO, Protocol

from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from services.lineage.core import LineageEvent
from services.lineage.run_events import run_event

log = logging.getLogger("tock.lineage")

Delivered = dict[int, tuple[int, int]]  # partition -> (offset, index) of the last event delivered


class SinkBusy(RuntimeError):
    """Another emitter holds this sink (its lock)."""


class Stopped(Exception):
    """The emitter was asked to stop while a delivery was being retried."""


class LocalSink(Protocol):
    """Where a single emitter delivers, and what it has delivered."""

    def delivered(self) -> Delivered: ...

    def deliver(self, event: LineageEvent) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class SingleWriter:
    """An exclusive flock on ``path``, held until closed (or the process dies)."""

    def __init__(self, path: Path, what: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise SinkBusy(f"another `tock lineage` is writing {what} (it holds {path}); stop it first") from None

    def close(self) -> None:
        os.close(self._fd)


def position_of(line: bytes) -> tuple[int, int, int]:
    """(partition, offset, index) of an emitted line, from its ``tock`` run facet."""
    facet = json.loads(line)["run"]["facets"]["tock"]
    return facet["partition"], facet["offset"], facet["index"]


class FileSink:
    """Appends each event as one line through openlineage-python's FileTransport (append mode)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = SingleWriter(path.with_name(path.name + ".lock"), str(path))
        self.transport = FileTransport(FileConfig(log_file_path=str(path), append=True))

    def delivered(self) -> Delivered:
        """Cut an unfinished last line, then the position of the last line of each partition."""
        if not self.path.exists():
            self.path.touch()
            _fsync_directory(self.path.parent)
        self._cut_unfinished_line()
        found: Delivered = {}
        with self.path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    partition, offset, index = position_of(line)
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{self.path} line {number} is no event of `tock lineage` ({error}); "
                                     "move the file aside or point TOCK_LINEAGE_FILE elsewhere") from None
                found[partition] = max(found.get(partition, (-1, -1)), (offset, index))
        return found

    def _cut_unfinished_line(self) -> None:
        size = self.path.stat().st_size
        if size == 0:
            return
        with self.path.open("rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            end = _last_newline_end(handle, size)
            log.warning("%s: its last line was left unfinished (%d bytes); cut, its event is emitted again",
                        self.path, size - end)
            handle.truncate(end)
            os.fsync(handle.fileno())

    def deliver(self, event: LineageEvent) -> None:
        self.transport.emit(run_event(event))

    def sync(self) -> None:
        descriptor = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def close(self) -> None:
        self._lock.close()


def _last_newline_end(handle: BinaryIO, size: int) -> int:
    """The offset just past the file's last newline (0: none)."""
    position, chunk = size, 64 * 1024
    while position > 0:
        start = max(0, position - chunk)
        handle.seek(start)
        found = handle.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        position = start
    return 0


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class HttpSink:
    """POSTs each event through openlineage-python's HttpTransport until it is accepted; records it."""

    RETRY_FIRST, RETRY_MOST = 0.5, 30.0

    def __init__(self, url: str, endpoint: str, timeout: float, progress: Path, stop: threading.Event) -> None:
        self.progress, self._stop = progress, stop
        self._lock = SingleWriter(progress.with_name(progress.name + ".lock"), f"to {url}")
        self.transport = HttpTransport(HttpConfig(url=url, endpoint=endpoint, timeout=timeout))
        self._delivered: Delivered = {}

    def delivered(self) -> Delivered:
        if self.progress.exists():
            recorded = json.loads(self.progress.read_text())
            self._delivered = {int(partition): (at[0], at[1]) for partition, at in recorded.items()}
        return dict(self._delivered)

    def deliver(self, event: LineageEvent) -> None:
        wait = self.RETRY_FIRST
        while True:
            try:
                self.transport.emit(run_event(event))
                break
            except Exception as error:  # noqa: BLE001 - any failure of a delivery is retried, said loudly
                log.warning("lineage event %s not accepted (%s); sending it again in %.1f s", event.dedup_key,
                            error, wait)
                if self._stop.wait(wait):
                    raise Stopped() from None
                wait = min(wait * 2, self.RETRY_MOST)
        self._delivered[event.tock.partition] = event.tock.position
        self._record()

    def _record(self) -> None:
        fresh = self.progress.with_name(self.progress.name + ".new")
        with fresh.open("w") as handle:
            json.dump({str(partition): list(at) for partition, at in self._delivered.items()}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(fresh, self.progress)

    def sync(self) -> None:
        """Each acceptance is recorded as it comes (``deliver``)."""

    def close(self) -> None:
        self._lock.close()
