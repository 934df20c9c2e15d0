"""Snapshots encoded off the decision thread: each in a forked child, which holds a copy-on-write image
of the partition's memory as it was at the fork, so the decision thread pays the fork (milliseconds,
whatever the memory's size), not the encoding (1.3 s for a partition of 2,000,000 events), as Redis saves
its data set in the background.

The child only encodes (memory.snapshot_of) and writes the bytes to a pipe: it touches no Kafka client,
no lock and no log, so the threads the fork left behind cannot hold it up; it exits with os._exit. The
scheduler reads the pipes without waiting on each turn and commits a finished snapshot with its next
decisions. A child that dies, or a memory that was replaced or forgotten meanwhile, costs that snapshot
only: the partition is due again at its next interval.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from typing import NoReturn

from services.scheduler.memory import PartitionMemory, snapshot_of

log = logging.getLogger("tock.scheduler")

READ_BYTES = 1 << 20


@dataclass
class Encoding:
    """One child encoding one partition's snapshot."""

    partition: int
    memory_id: int  # id() of the memory it encodes: another memory (a takeover since) drops it
    pid: int
    fd: int
    started: float
    chunks: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Encoded:
    partition: int
    memory_id: int
    value: bytes
    seconds: float  # from the fork to the last byte read


class SnapshotEncoder:
    """The children encoding snapshots, at most one per partition."""

    def __init__(self) -> None:
        self._children: dict[int, Encoding] = {}

    def encoding(self) -> frozenset[int]:
        """The partitions whose snapshot is being encoded."""
        return frozenset(self._children)

    def start(self, partition: int, memory: PartitionMemory) -> None:
        """Fork a child that encodes the memory as it is now."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _encode_and_exit(memory, write_end)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self._children[partition] = Encoding(partition, id(memory), pid, read_end, time.monotonic())

    def collect(self) -> list[Encoded]:
        """The snapshots finished since the last call (never waits for one that is not)."""
        finished = []
        for encoding in list(self._children.values()):
            ended = _read_available(encoding)
            if ended:
                done = self._end(encoding)
                if done is not None:
                    finished.append(done)
        return finished

    def drop(self, partition: int) -> None:
        """The partition was lost: its snapshot is not ours to write."""
        encoding = self._children.get(partition)
        if encoding is not None:
            _stop(encoding.pid)
            self._end(encoding)

    def close(self) -> None:
        for partition in list(self._children):
            self.drop(partition)

    def _end(self, encoding: Encoding) -> Encoded | None:
        del self._children[encoding.partition]
        os.close(encoding.fd)
        _pid, status = os.waitpid(encoding.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            log.warning("partition %d: the process encoding its snapshot ended with %d; it is due again later",
                        encoding.partition, os.waitstatus_to_exitcode(status))
            return None
        return Encoded(encoding.partition, encoding.memory_id, b"".join(encoding.chunks),
                       time.monotonic() - encoding.started)


def _read_available(encoding: Encoding) -> bool:
    """Read what the child wrote so far; True once it closed the pipe (all of it read)."""
    while True:
        try:
            chunk = os.read(encoding.fd, READ_BYTES)
        except BlockingIOError:
            return False
        except OSError as error:
            if error.errno == errno.EINTR:
                continue
            raise
        if not chunk:
            return True
        encoding.chunks.append(chunk)


def _encode_and_exit(memory: PartitionMemory, fd: int) -> NoReturn:
    """In the child: encode, write it all, exit (0, or 1 on any error) without running the parent's
    exit handlers or flushing its buffers."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        view = memoryview(snapshot_of(memory))
        while view:
            view = view[os.write(fd, view):]
        code = 0
    finally:
        os._exit(code)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
