"""What a monitor holds per owned partition (its fold), and how it is rebuilt on being assigned one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from infra.log import LogRecord, replay
from infra.settings import Settings
from schemas import DAGS, EVENTS
from services.monitor.core import DagDefinitionRemoved, MonitorState, UnknownEvent, evolve

log = logging.getLogger("tock.monitor")


class PartitionFold:
    """One owned partition: its state and the next offset of tock.dags and tock.events."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state = MonitorState()
        self.positions = {DAGS: 0, EVENTS: 0}

    def fold_record(self, logical: str, record: LogRecord) -> None:
        self.positions[logical] = record.offset + 1
        event = record.event
        if event is None:
            if logical != DAGS or record.key is None:
                return
            event = DagDefinitionRemoved(record.key)
        try:
            evolve(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d: %s; ignored", self.partition, error)


def rebuild(settings: Settings, partitions: list[int], client_id: str) -> dict[int, PartitionFold]:
    """Replay partitions of tock.dags then tock.events up to their ends into fresh folds."""
    folds = {partition: PartitionFold(partition) for partition in partitions}
    for logical in (DAGS, EVENTS):
        for record in replay(settings, logical, partitions, client_id=f"{client_id}-replay-{logical}"):
            folds[record.partition].fold_record(logical, record)
    return folds


@dataclass
class HeldFolds:
    """The owned partitions' folds, and the lock that guards them against the HTTP thread."""

    folds: dict[int, PartitionFold] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def positions(self) -> dict[int, dict[str, int]]:
        """Each owned partition's next offsets (call holding the lock)."""
        return {partition: fold.positions for partition, fold in self.folds.items()}

    def forget(self, partitions: Iterable[int]) -> None:
        """Revoked partitions (call holding the lock)."""
        for partition in partitions:
            self.folds.pop(partition, None)
