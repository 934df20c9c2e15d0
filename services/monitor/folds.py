"""What a monitor holds per owned partition (its fold), and how it is rebuilt on being assigned one:
from the partition's latest snapshot (services/monitor/snapshots.py) and the records after it, or
from the start of the log when there is none."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from infra.log import LogRecord, replay
from infra.log.read_back import AwaitedDecisions
from infra.settings import Settings
from schemas import DAGS, EVENTS
from services.monitor.core import DagDefinitionRemoved, MonitorState, UnknownEvent, evolve

log = logging.getLogger("tock.monitor")


class PartitionFold:
    """One owned partition: its state, the next offset of tock.dags and tock.events, how much was
    folded since its last snapshot (or its takeover), and our decisions not read back yet (folded
    when read back, in the log's order, never at commit: infra/log/read_back.py)."""

    def __init__(self, partition: int, state: MonitorState | None = None,
                 positions: dict[str, int] | None = None) -> None:
        self.partition = partition
        self.state = MonitorState() if state is None else state
        self.positions = {DAGS: 0, EVENTS: 0} if positions is None else positions
        self.folded_since_snapshot = 0
        self.snapshot_at = 0.0  # when its last snapshot was committed (or it was taken over)
        self.awaiting = AwaitedDecisions(partition, EVENTS)

    def fold_record(self, logical: str, record: LogRecord) -> None:
        self.positions[logical] = record.offset + 1
        self.folded_since_snapshot += 1
        event = record.event
        if event is None:
            if logical != DAGS or record.key is None:
                return
            event = DagDefinitionRemoved(record.key)
        elif logical == EVENTS:
            self.awaiting.read_back(event)
        try:
            evolve(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d: %s; ignored", self.partition, error)


def rebuild(settings: Settings, partitions: list[int], client_id: str,
            restored: dict[int, PartitionFold] | None = None) -> dict[int, PartitionFold]:
    """Replay partitions of tock.dags then tock.events up to their ends into fresh folds, or on from
    ``restored`` folds (from snapshots) from the offsets they cover. Each fold's
    ``folded_since_snapshot`` then counts the records replayed."""
    restored = restored or {}
    folds = {partition: restored.get(partition) or PartitionFold(partition) for partition in partitions}
    for logical in (DAGS, EVENTS):
        start = {partition: fold.positions[logical] for partition, fold in restored.items()}
        for record in replay(settings, logical, partitions, client_id=f"{client_id}-replay-{logical}", start=start):
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
