"""What a scheduler holds per owned partition, and how it is rebuilt on being assigned one.

Partition p of tock.dags, tock.events and tock.heartbeats concerns the same DAGs, so a
partition's memory is the fold of p of those three topics (in that order on replay), or the
latest snapshot of p (tock.snapshots, key and partition p) and the fold of what follows it.
"""

from __future__ import annotations

import logging
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from infra.log import LogRecord, replay
from infra.log.read_back import AwaitedDecisions
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DAGS, EVENTS, HEARTBEATS, TaskLaunched, TaskQueued
from services.scheduler.core import DagTombstone, SchedulerState, UnknownEvent, evolve
from services.scheduler.core.forgotten import Retention
from services.scheduler.core.heard import as_heard
from services.scheduler.core.model import TryKey, instance_key
from services.scheduler.core.snapshot import Snapshot, SnapshotRefused, decode_snapshot, encode_snapshot
from services.scheduler.snapshot_store import latest_snapshot

log = logging.getLogger("tock.scheduler")

REPLAYED_TOPICS = (DAGS, EVENTS, HEARTBEATS)
SNAPSHOT_READ_TIMEOUT = 10.0  # past it, a takeover replays the full history
PRUNE_SLACK = 1024  # queued-offset notes kept beyond twice the tries waiting for a launch


@dataclass
class PartitionMemory:
    """One owned partition: its state, folded in log order, the next offsets, and our own committed
    decisions not read back yet.

    Our decisions are folded when they are read back, like anyone's records, never when they are
    committed: records of others may precede them in the log (a runner's TaskStarted written while
    we decided), and the state must be what a replay folds, in the log's order. Until its own
    decisions are read back a partition is *unsettled*: nothing more is decided or launched for
    it, or the same decision would be made twice.
    """

    partition: int
    state: SchedulerState = field(default_factory=SchedulerState)
    positions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REPLAYED_TOPICS, 0))
    awaiting: AwaitedDecisions = field(init=False)  # our committed decisions on tock.events, in order
    folded_since_snapshot: int = 0  # records read since the last snapshot (or the takeover)
    # Each try queued and not launched yet: (try number, offset of its TaskQueued), handed to its runner
    # so that its claim reads from there (a memory restored from a snapshot knows none older than it).
    queued_offsets: dict[TryKey, tuple[int, int]] = field(default_factory=dict)
    snapshot_at: float = 0.0        # when the last snapshot was committed (or the takeover done)

    def fold_record(self, logical: str, record: LogRecord) -> Any | None:
        """Fold one record read from the log; returns the event folded (None if skipped)."""
        self.positions[logical] = record.offset + 1
        self.folded_since_snapshot += 1
        event = record.event
        if event is None:
            if logical != DAGS or record.key is None:
                return None
            event = DagTombstone(record.key)
        elif logical == EVENTS:
            self.awaiting.read_back(event)  # if ours: folded now, in its place in the log
            self._note_queued(event, record.offset)
        return self.fold(as_heard(event, record.appended_at))  # a runner's report on the broker's clock

    def _note_queued(self, event: Any, offset: int) -> None:
        if isinstance(event, TaskQueued):
            if len(self.queued_offsets) >= 2 * len(self.state.unlaunched) + PRUNE_SLACK:
                self._prune_queued()  # (before the note: this try is not folded as waiting yet)
            self.queued_offsets[_try_key(event)] = (event.try_number, offset)
        elif isinstance(event, TaskLaunched):
            self.queued_offsets.pop(_try_key(event), None)

    def _prune_queued(self) -> None:
        """Forget the offsets of tries no longer waiting for a launch: cleared, removed or ended before one
        (no TaskLaunched comes for them). Done when the notes outnumber the waiting tries twice over, so they
        stay bounded by what waits, at a constant cost per try queued."""
        waiting = self.state.unlaunched
        self.queued_offsets = {key: noted for key, noted in self.queued_offsets.items() if key in waiting}

    def queued_offset(self, key: TryKey, try_number: int) -> int:
        """The offset of this try's TaskQueued, if this memory read it (-1: unknown)."""
        noted = self.queued_offsets.get(key)
        return noted[1] if noted is not None and noted[0] == try_number else -1

    def fold(self, event: Any) -> Any | None:
        try:
            evolve(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d: %s; recorded in the log, ignored here", self.partition, error)
            return None
        return event

    def __post_init__(self) -> None:
        self.awaiting = AwaitedDecisions(self.partition, EVENTS)

    def committed(self, events: list, now: float) -> None:
        """Our decisions were committed: the partition is unsettled until they are read back."""
        self.awaiting.committed(events, now)

    def settled(self, now: float) -> bool:
        """Whether every decision of ours is folded (so deciding again sees them)."""
        return self.awaiting.settled(now)


def _try_key(event: TaskQueued | TaskLaunched) -> TryKey:
    return (event.dag_id, event.run_id, instance_key(event.task_id, event.map_index))


def snapshot_of(memory: PartitionMemory) -> bytes:
    """The memory as a snapshot record value: the fold of the log up to its positions."""
    return encode_snapshot(Snapshot(memory.partition, memory.state, dict(memory.positions)))


def restore(settings: Settings, partitions: list[int], client_id: str = "tock-scheduler-snapshots"
            ) -> dict[int, PartitionMemory]:
    """The memories of ``partitions`` whose latest snapshot this code can read (the others: none)."""
    memories = {}
    for partition in partitions:
        snapshot = _latest_snapshot(settings, partition, client_id)
        if snapshot is not None:
            snapshot.state.retention = retention_of(settings)  # settings, not in the snapshot
            memories[partition] = PartitionMemory(partition, snapshot.state, snapshot.positions)
    return memories


def _latest_snapshot(settings: Settings, partition: int, client_id: str) -> Snapshot | None:
    """The latest snapshot of ``partition`` (whole, or reassembled from its parts) if this code can read
    it; else None, saying why."""
    try:
        found = latest_snapshot(settings, partition, client_id=client_id, timeout=SNAPSHOT_READ_TIMEOUT)
    except (KafkaException, TimeoutError) as error:
        log.warning("the snapshot of partition %d could not be read (%s): replaying the full history",
                    partition, error)
        return None
    except SnapshotRefused as refused:  # a snapshot in parts, incomplete or mixed
        log.warning("%s: replaying the full history", refused)
        return None
    if found is None:
        return None
    try:
        snapshot = decode_snapshot(found[1])
    except SnapshotRefused as refused:
        log.warning("%s (offset %d of the snapshots): replaying the full history", refused, found[0])
        return None
    if snapshot.partition != partition:
        log.warning("the snapshot at offset %d of partition %d is of partition %d: replaying the full history",
                    found[0], partition, snapshot.partition)
        return None
    return snapshot


def retention_of(settings: Settings) -> Retention:
    """What a partition's fold keeps of finished history (core/retention.py)."""
    return Retention(finished_runs_kept=settings.scheduler_finished_runs_kept,
                     request_ids_kept=settings.scheduler_request_ids_kept)


def rebuild(settings: Settings, partitions: list[int], restored: dict[int, PartitionMemory] | None = None
            ) -> dict[int, PartitionMemory]:
    """Replay partitions of tock.dags, tock.events and tock.heartbeats into fresh memories, or on from
    ``restored`` memories (from snapshots) from the offsets they cover.

    The three topics are read at once (reading is mostly waiting on the broker) and folded
    in that order: definitions before runs, runs before their heartbeats. tock.events is
    folded as it streams in, through a bounded queue, so a long history never sits in memory.
    """
    restored = restored or {}
    memories = {partition: restored.get(partition)
                or PartitionMemory(partition, state=SchedulerState(retention=retention_of(settings)))
                for partition in partitions}
    if not partitions:
        return memories
    starts = {logical: {partition: memory.positions[logical] for partition, memory in restored.items()}
              for logical in REPLAYED_TOPICS}
    events: queue.Queue = queue.Queue(maxsize=REPLAY_QUEUE)
    with ThreadPoolExecutor(len(REPLAYED_TOPICS), thread_name_prefix="replay") as pool:
        dags = pool.submit(_read, settings, DAGS, partitions, starts[DAGS])
        streaming = pool.submit(_stream, settings, EVENTS, partitions, events, starts[EVENTS])
        heartbeats = pool.submit(_read, settings, HEARTBEATS, partitions, starts[HEARTBEATS])
        _fold_all(memories, DAGS, dags.result())
        _fold_all(memories, EVENTS, iter(events.get, _END))
        streaming.result()
        _fold_all(memories, HEARTBEATS, heartbeats.result())
    return memories


REPLAY_QUEUE = 10_000
_END = object()


def _fold_all(memories: dict[int, PartitionMemory], logical: str, records) -> None:
    for record in records:
        memories[record.partition].fold_record(logical, record)


def _read(settings: Settings, logical: str, partitions: list[int], start: dict[int, int]) -> list[LogRecord]:
    return list(replay(settings, logical, partitions, client_id=f"tock-scheduler-replay-{logical}", start=start))


def _stream(settings: Settings, logical: str, partitions: list[int], into: queue.Queue,
            start: dict[int, int]) -> None:
    try:
        for record in replay(settings, logical, partitions, client_id=f"tock-scheduler-replay-{logical}",
                             start=start):
            into.put(record)
    finally:
        into.put(_END)


def logical_topics(settings: Settings) -> dict[str, str]:
    """Real topic name -> logical name, for the topics a scheduler reads."""
    return {topic_name(settings.topic_prefix, logical): logical for logical in REPLAYED_TOPICS}
