"""One partition of tock.events as the lineage core folds it, and how a fold is rebuilt from the log up to an
offset (where the emitter's delivered output ends) without emitting anything."""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING

from infra.log import EventReader, LogRecord
from infra.log.replay import REPLAY_FETCH
from infra.settings import Settings
from infra.topics import topic_name
from schemas import EVENTS, EventsTopicEvent
from services.lineage.core import LineageConfig, LineageEvent, LineageState, Position, UnknownEvent, decide_lineage
from services.lineage.core import evolve as evolve_lineage

log = logging.getLogger("tock.lineage")

_BATCH = 10_000


class PartitionLineage:
    """One partition's fold and the next offset of tock.events it has not folded."""

    def __init__(self, partition: int, config: LineageConfig) -> None:
        self.partition, self.config = partition, config
        self.state = LineageState()
        self.next_offset = 0

    def apply(self, record: LogRecord) -> list[LineageEvent]:
        """The lineage events of ``record`` (the next record of the partition), then fold it."""
        self.next_offset = record.offset + 1
        event = record.event
        if event is None:  # tock.events has no tombstones; nothing to fold in one
            return []
        try:
            if not isinstance(event, EventsTopicEvent):
                raise UnknownEvent(f"{type(event).__name__} is no event of tock.events")
            emitted = decide_lineage(self.state, event, Position(record.partition, record.offset), self.config)
            evolve_lineage(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d offset %d: %s; skipped", record.partition, record.offset, error)
            return []
        return emitted


def rebuild(settings: Settings, partition: int, end: int, config: LineageConfig, client_id: str,
            timeout: float = 60.0) -> PartitionLineage:
    """The fold of ``partition`` up to offset ``end`` (exclusive), read read_committed from the start: what
    an emitter had folded when it delivered everything before ``end``. Emits nothing."""
    fold = PartitionLineage(partition, config)
    if end <= 0:
        return fold
    reader = EventReader(settings, [], client_id=f"{client_id}-rebuild", partition_eof=True, config=REPLAY_FETCH)
    topic = topic_name(settings.topic_prefix, EVENTS)
    try:
        reader.assign([(EVENTS, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while fold.next_offset < end:
            for record in reader.poll(0.05, _BATCH):
                if record.offset < end:
                    fold.apply(record)
            # Past the last record below ``end`` come transaction markers only (never delivered).
            reached = reader.read_positions([(topic, partition)]).get((topic, partition), 0)
            if reached >= end or (topic, partition) in reader.at_end:
                fold.next_offset = max(fold.next_offset, min(reached, end))
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"rebuilding the lineage of {topic}[{partition}] up to offset {end}: only "
                                   f"{fold.next_offset} reached after {timeout:g} s")
    finally:
        reader.close()
    fold.next_offset = end
    return fold
