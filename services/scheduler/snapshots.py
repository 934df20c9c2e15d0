"""Snapshots of the owned partitions' memories, committed in the decisions' transaction.

When one is due (core/snapshot.py), how one is built (memory.snapshot_of) and kept under the
limit of tock.snapshots, and putting one off after an aborted transaction.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer

from infra.log import RawRecord
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES, topic_name
from schemas import SNAPSHOTS
from services.scheduler.core.snapshot import snapshot_due
from services.scheduler.holdings import Holdings
from services.scheduler.memory import snapshot_of
from services.scheduler.metrics import SchedulerMetrics

log = logging.getLogger("tock.scheduler")

SNAPSHOT_RECORD_OVERHEAD = 64 * 1024  # key and batch framing around a snapshot's value, kept under the limits


def snapshot_topic_exists(settings: Settings, consumer: Consumer) -> bool:
    """Whether tock.snapshots exists: writing to a missing topic would abort every transaction
    (an upgrade that did not run `tock topics create`). Without it, no snapshots."""
    topic = topic_name(settings.topic_prefix, SNAPSHOTS)
    found = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        log.error("topic %s does not exist: no snapshots are written, every takeover replays the full "
                  "history (`tock topics create` creates it)", topic)
        return False
    return True


class Snapshots:
    """Which owned partitions' snapshots are due, and their records. ``on`` is False without the topic."""

    def __init__(self, settings: Settings, holdings: Holdings, metrics: SchedulerMetrics, *, on: bool) -> None:
        self._every = settings.scheduler_snapshot_every_events
        self._interval = settings.scheduler_snapshot_interval_seconds
        self._holdings, self._metrics, self.on = holdings, metrics, on

    def due(self, now: float) -> list[int]:
        if not self.on:
            return []
        return [partition for partition, memory in self._holdings.memories.items()
                if partition not in self._holdings.adoption_due
                and snapshot_due(memory.folded_since_snapshot, now - memory.snapshot_at, self._every, self._interval)]

    def all(self) -> list[int]:
        """Every owned partition, if snapshots are on (when stopping: a fast restart)."""
        return sorted(self._holdings.memories) if self.on else []

    def put_off(self, partitions: list[int]) -> None:
        """After an aborted transaction that carried snapshots, decide again without them: should the
        snapshot itself be what the broker refused, the decisions must not wait on it."""
        self._restart_count(partitions)
        if partitions:
            log.warning("snapshots of partitions %s put off to their next turn", sorted(partitions))

    def written(self, records: list[RawRecord]) -> None:
        """Committed: count again from now."""
        self._restart_count([record.partition for record in records])

    def records(self, partitions: list[int]) -> list[RawRecord]:
        """Snapshots of these partitions' memories as they are now: before the decisions of the
        transaction they go out in are folded (see memory.snapshot_of)."""
        records = []
        for partition in partitions:
            value = self._measured(partition)
            if len(value) > SNAPSHOT_MAX_BYTES - SNAPSHOT_RECORD_OVERHEAD:
                log.warning("partition %d: snapshot of %d bytes is over the limit of tock.snapshots (%d bytes a "
                            "record); not written (a takeover replays the full history)", partition, len(value),
                            SNAPSHOT_MAX_BYTES)
                self._restart_count([partition])
                continue
            records.append(RawRecord(SNAPSHOTS, partition, str(partition), value))
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
