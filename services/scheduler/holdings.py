"""What a scheduler instance holds of the partitions it owns, between two turns of its loop.

Per owned partition its memory (services/scheduler/memory.py); which partitions were just taken
over and wait for their adoptions to commit; and which runs the next ``decide`` walks: those the
records just folded touched (our own decisions among them, once read back), those touched while
the partition waited for its decisions to be read back, or all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from schemas import EVENTS
from services.scheduler.memory import PartitionMemory
from services.scheduler.runs_touched import RunKey

Walk: TypeAlias = set[RunKey] | None  # the runs to walk; None: every run of the partition
Touched: TypeAlias = dict[int, Walk]  # per partition


@dataclass
class Holdings:
    """The owned partitions' memories, the ones due adoption, and the runs to walk again."""

    memories: dict[int, PartitionMemory] = field(default_factory=dict)
    adoption_due: set[int] = field(default_factory=set)
    full_walk: set[int] = field(default_factory=set)
    deferred: dict[int, set[RunKey]] = field(default_factory=dict)  # runs touched while a partition was unsettled
    assigned_at: dict[int, float] = field(default_factory=dict)  # when each takeover began (for benchmarks)

    def taken_over(self, memories: dict[int, PartitionMemory], started: float) -> None:
        """Replayed partitions: held from now on, due adoption, every run walked."""
        self.memories.update(memories)
        self.adoption_due.update(memories)
        self.full_walk.update(memories)
        self.assigned_at.update(dict.fromkeys(memories, started))

    def forget(self, partition: int) -> PartitionMemory | None:
        """A revoked partition: nothing of it is kept; returns its memory, if it was held."""
        self.adoption_due.discard(partition)
        return self.memories.pop(partition, None)

    def walk(self, partition: int, touched: Touched) -> Walk:
        """The runs of ``partition`` to walk this turn."""
        walk = touched.get(partition, set())
        if partition in self.full_walk or walk is None:
            return None
        return walk | self.deferred.get(partition, set())

    def defer(self, partition: int, walk: Walk) -> None:
        """``partition`` is not decided this turn (unsettled): walk these runs when it is."""
        if walk is None:
            self.full_walk.add(partition)
        else:
            self.deferred[partition] = walk

    def walked(self, partition: int) -> None:
        self.full_walk.discard(partition)
        self.deferred.pop(partition, None)

    def walk_everything(self) -> None:
        """Decisions were lost (an aborted commit): their runs may see no new event, walk all."""
        self.full_walk.update(self.memories)

    def offsets(self, events_topic: str) -> dict[tuple[str, int], int]:
        """The consumed offsets of tock.events to commit with the decisions."""
        return {(events_topic, partition): memory.positions[EVENTS] for partition, memory in self.memories.items()}

    def positions(self) -> dict[int, dict[str, int]]:
        return {partition: memory.positions for partition, memory in self.memories.items()}
