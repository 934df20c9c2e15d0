"""What a scheduler holds per owned partition, and how it is rebuilt on being assigned one.

Partition p of tock.dags, tock.events and tock.heartbeats concerns the same DAGs, so a
partition's memory is the fold of p of those three topics (in that order on replay).
"""

from __future__ import annotations

import logging
import queue
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infra.log import LogRecord, replay
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DAGS, EVENTS, HEARTBEATS
from services.scheduler.core import DagTombstone, SchedulerState, UnknownEvent, evolve

log = logging.getLogger("tock.scheduler")

REPLAYED_TOPICS = (DAGS, EVENTS, HEARTBEATS)


@dataclass
class PartitionMemory:
    """One owned partition: its folded state, next offsets, and our own decisions not yet read back."""

    partition: int
    state: SchedulerState = field(default_factory=SchedulerState)
    positions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REPLAYED_TOPICS, 0))
    echoes: deque = field(default_factory=deque)

    def fold_record(self, logical: str, record: LogRecord) -> Any | None:
        """Fold one record read from the log; returns the event folded (None if skipped)."""
        self.positions[logical] = record.offset + 1
        event = record.event
        if event is None:
            if logical != DAGS or record.key is None:
                return None
            event = DagTombstone(record.key)
        elif logical == EVENTS and self.echoes and self.echoes[0] == event:
            self.echoes.popleft()  # our own decision, folded when it was committed
            return None
        return self.fold(event)

    def fold(self, event: Any) -> Any | None:
        try:
            evolve(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d: %s; recorded in the log, ignored here", self.partition, error)
            return None
        return event

    def apply_decisions(self, events: list) -> None:
        """Fold our committed decisions now; their copies read back from tock.events are skipped."""
        for event in events:
            self.fold(event)
            if event.TOPIC == EVENTS:
                self.echoes.append(event)


def rebuild(settings: Settings, partitions: list[int]) -> dict[int, PartitionMemory]:
    """Replay partitions of tock.dags, tock.events and tock.heartbeats into fresh memories.

    The three topics are read at once (reading is mostly waiting on the broker) and folded
    in that order: definitions before runs, runs before their heartbeats. tock.events is
    folded as it streams in, through a bounded queue, so a long history never sits in memory.
    """
    memories = {partition: PartitionMemory(partition) for partition in partitions}
    if not partitions:
        return memories
    events: queue.Queue = queue.Queue(maxsize=REPLAY_QUEUE)
    with ThreadPoolExecutor(len(REPLAYED_TOPICS), thread_name_prefix="replay") as pool:
        dags = pool.submit(_read, settings, DAGS, partitions)
        streaming = pool.submit(_stream, settings, EVENTS, partitions, events)
        heartbeats = pool.submit(_read, settings, HEARTBEATS, partitions)
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


def _read(settings: Settings, logical: str, partitions: list[int]) -> list[LogRecord]:
    return list(replay(settings, logical, partitions, client_id=f"tock-scheduler-replay-{logical}"))


def _stream(settings: Settings, logical: str, partitions: list[int], into: queue.Queue) -> None:
    try:
        for record in replay(settings, logical, partitions, client_id=f"tock-scheduler-replay-{logical}"):
            into.put(record)
    finally:
        into.put(_END)


def logical_topics(settings: Settings) -> dict[str, str]:
    """Real topic name -> logical name, for the topics a scheduler reads."""
    return {topic_name(settings.topic_prefix, logical): logical for logical in REPLAYED_TOPICS}
