"""Snapshots of the owned partitions' memories, committed in the decisions' transaction.

When one is due (core/snapshot.py), how one is built (memory.snapshot_of: in a forked child while the
scheduler decides on, snapshot_encoding.py; in this process when stopping) and written as records of
tock.snapshots (one, or parts and a head when it is over a record's limit: snapshot_store.py), and
putting one off after an aborted transaction.
"""

from __future__ import annotations

import logging
import time

from infra.log import RawRecord
from infra.settings import Settings
from services.scheduler.core.snapshot import snapshot_due
from services.scheduler.holdings import Holdings
from services.scheduler.memory import snapshot_of
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.snapshot_encoding import SnapshotEncoder
from services.scheduler.snapshot_store import RECORD_BYTES, parts_written, snapshot_records

log = logging.getLogger("tock.scheduler")



class Snapshots:
    """Which owned partitions' snapshots are due, and their records. ``on`` is False without the topic."""

    def __init__(self, settings: Settings, holdings: Holdings, metrics: SchedulerMetrics, *, on: bool) -> None:
        self._every = settings.scheduler_snapshot_every_events
        self._interval = settings.scheduler_snapshot_interval_seconds
        self._holdings, self._metrics, self.on = holdings, metrics, on
        # Per partition: (id of the memory, parts its last committed snapshot had). Another memory
        # (a takeover since) does not know what the previous owner wrote.
        self._parts: dict[int, tuple[int, int]] = {}
        self._encoder = SnapshotEncoder()
        self._encoded: dict[int, bytes] = {}  # partition -> its snapshot encoded in the background, not written

    def due(self, now: float) -> list[int]:
        if not self.on:
            return []
        busy = self._encoder.encoding() | self._encoded.keys()
        return [partition for partition, memory in self._holdings.memories.items()
                if partition not in self._holdings.adoption_due and partition not in busy
                and snapshot_due(memory.folded_since_snapshot, now - memory.snapshot_at, self._every, self._interval)]

    def begin(self, now: float) -> None:
        """Start encoding the snapshots due, each in a child of its own (the count starts again now)."""
        for partition in self.due(now):
            started = time.process_time()
            self._encoder.start(partition, self._holdings.memories[partition])
            self._metrics.snapshot_seconds.observe(time.process_time() - started)  # what the decisions wait
            self._restart_count([partition])

    def finished(self) -> list[int]:
        """The partitions whose snapshot is encoded and may go out with the next decisions (a memory
        replaced or forgotten since the fork has none)."""
        for encoded in self._encoder.collect():
            memory = self._holdings.memories.get(encoded.partition)
            if memory is not None and id(memory) == encoded.memory_id:
                self._encoded[encoded.partition] = encoded.value
                log.debug("partition %d: snapshot of %d bytes encoded in %.3f s beside the decisions",
                          encoded.partition, len(encoded.value), encoded.seconds)
        for partition in [partition for partition in self._encoded if partition not in self._holdings.memories]:
            del self._encoded[partition]
        return sorted(self._encoded)

    def close(self) -> None:
        """Stop the children still encoding (their snapshots are not needed any more)."""
        self._encoder.close()

    def all(self) -> list[int]:
        """Every owned partition, if snapshots are on (when stopping: a fast restart)."""
        return sorted(self._holdings.memories) if self.on else []

    def put_off(self, partitions: list[int]) -> None:
        """After an aborted transaction that carried snapshots, decide again without them: should the
        snapshot itself be what the broker refused, the decisions must not wait on it."""
        self._restart_count(partitions)
        for partition in partitions:
            self._encoded.pop(partition, None)
        if partitions:
            log.warning("snapshots of partitions %s put off to their next turn", sorted(partitions))

    def written(self, records: list[RawRecord]) -> None:
        """Committed: count again from now."""
        self._restart_count([record.partition for record in records])
        for record in records:
            self._encoded.pop(record.partition, None)
        for partition, parts in parts_written(records).items():
            memory = self._holdings.memories.get(partition)
            if memory is not None:
                self._parts[partition] = (id(memory), parts)

    def records(self, partitions: list[int]) -> list[RawRecord]:
        """Snapshots of these partitions' memories: encoded in the background (as they were at its
        fork), or as they are now: before the decisions of the transaction they go out in are folded
        (see memory.snapshot_of)."""
        records = []
        for partition in partitions:
            value = self._encoded.get(partition) or self._measured(partition)
            memory_id, earlier = self._parts.get(partition, (0, 0))
            known = memory_id == id(self._holdings.memories[partition])
            written = snapshot_records(partition, value, earlier if known else None)
            if len(value) > RECORD_BYTES:
                log.info("partition %d: the snapshot of %d bytes is over a record's limit: written as %d parts "
                         "and their head", partition, len(value), parts_written(written)[partition])
            records += written
        return records

    def _measured(self, partition: int) -> bytes:
        started = time.process_time()
        value = snapshot_of(self._holdings.memories[partition])
        self._metrics.snapshot_seconds.observe(time.process_time() - started)
        self._metrics.snapshot_bytes.observe(len(value))
        return value

    def _restart_count(self, partitions: list[int]) -> None:
        for partition in partitions:
            memory = self._holdings.memories.get(partition)
            if memory is not None:
                memory.folded_since_snapshot, memory.snapshot_at = 0, time.time()
