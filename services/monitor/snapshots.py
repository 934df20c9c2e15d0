"""Snapshots of the monitor's owned partitions' folds, committed with its consumed offsets.

A takeover restores the latest snapshot of each partition and replays only what follows it
(services/monitor/folds.py), instead of the partition's whole history. A snapshot is a record of
tock.snapshots, in the partition it is of, under the key ``monitor.<partition>`` (the scheduler's
are keyed by the bare partition number: compaction keeps the latest of each). It is written in a
transaction with the offsets it covers and the group metadata (KIP-447), so a monitor that lost
the partition cannot commit one, and its state is the fold before the decisions that go out in
the same transaction (they lie after those offsets; core/snapshot.py says why any moment will do).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException

from infra.log import RawRecord
from infra.log.latest import latest_value
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES
from schemas import SNAPSHOTS
from services.monitor.core.snapshot import (
    MonitorSnapshot,
    SnapshotRefused,
    decode_snapshot,
    encode_snapshot,
    snapshot_due,
)
from services.monitor.folds import HeldFolds, PartitionFold

log = logging.getLogger("tock.monitor")

SNAPSHOT_READ_TIMEOUT = 10.0  # past it, a takeover replays the full history
RECORD_OVERHEAD = 64 * 1024  # key and batch framing around a snapshot's value, kept under the limits


def snapshot_key(partition: int) -> str:
    return f"monitor.{partition}"



def restore(settings: Settings, partitions: list[int], client_id: str) -> dict[int, PartitionFold]:
    """The folds of ``partitions`` whose latest snapshot this code can read (the others: none)."""
    folds = {}
    for partition in partitions:
        try:
            found = latest_value(settings, SNAPSHOTS, partition, snapshot_key(partition), client_id=client_id,
                                 timeout=SNAPSHOT_READ_TIMEOUT)
        except (KafkaException, TimeoutError) as error:
            log.warning("the monitor snapshot of partition %d could not be read (%s): replaying the full history",
                        partition, error)
            continue
        if found is None:
            continue
        try:
            snapshot = decode_snapshot(found[1])
        except SnapshotRefused as refused:
            log.warning("%s (offset %d of the snapshots): replaying the full history", refused, found[0])
            continue
        if snapshot.partition != partition:
            log.warning("the monitor snapshot at offset %d of partition %d is of partition %d: replaying the full "
                        "history", found[0], partition, snapshot.partition)
            continue
        folds[partition] = PartitionFold(partition, snapshot.state, snapshot.positions)
    return folds


class MonitorSnapshots:
    """Which owned partitions are due a snapshot, and their records. ``on`` is False without the topic."""

    def __init__(self, settings: Settings, held: HeldFolds, *, on: bool) -> None:
        self._every = settings.monitor_snapshot_every_events
        self._interval = settings.monitor_snapshot_interval_seconds
        self._held, self.on = held, on

    def due(self, now: float) -> list[int]:
        """Call holding the folds' lock."""
        if not self.on:
            return []
        return [partition for partition, fold in self._held.folds.items()
                if snapshot_due(fold.folded_since_snapshot, now - fold.snapshot_at, self._every, self._interval)]

    def records(self, partitions: list[int]) -> list[RawRecord]:
        """Snapshots of these partitions' folds as they are now (call holding the lock)."""
        records = []
        for partition in partitions:
            fold = self._held.folds[partition]
            value = encode_snapshot(MonitorSnapshot(partition, fold.state, dict(fold.positions)))
            if len(value) > SNAPSHOT_MAX_BYTES - RECORD_OVERHEAD:
                log.warning("partition %d: monitor snapshot of %d bytes is over the limit of tock.snapshots; not "
                            "written (a takeover replays from the last one, or the full history)", partition,
                            len(value))
                self.restart([partition])
                continue
            records.append(RawRecord(SNAPSHOTS, partition, snapshot_key(partition), value))
        return records

    def restart(self, partitions: list[int]) -> None:
        """Count again from now: written, put off after an aborted transaction, or too big (call holding the
        lock)."""
        now = time.time()
        for partition in partitions:
            fold = self._held.folds.get(partition)
            if fold is not None:
                fold.folded_since_snapshot, fold.snapshot_at = 0, now
