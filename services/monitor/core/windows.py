"""Windowed statistics, pure: each observation lands in the windows its event time falls in.

A window is ``[start, start + size)``; tumbling windows have ``step == size``, hopping
windows a smaller step (an observation then lands in ``size / step`` windows). Windows
are placed by the event's own timestamp (its ``at``), never by the clock, so replaying
the log gives the same tables. Windows older than ``retention`` before the newest event
time seen are dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Key = tuple[str, ...]


@dataclass(frozen=True)
class WindowSpec:
    """How windows are laid out: ``name`` (e.g. "tumbling"), size and step in seconds."""

    name: str
    size: float
    step: float

    def starts(self, at: float) -> list[float]:
        """Start of every window of this spec that contains time ``at``."""
        last = math.floor(at / self.step) * self.step
        count = max(1, math.ceil(self.size / self.step))
        return [start for start in (last - index * self.step for index in range(count)) if start + self.size > at]


TUMBLING_5M = WindowSpec("tumbling", 300.0, 300.0)
HOPPING_5M_1M = WindowSpec("hopping", 300.0, 60.0)
DEFAULT_SPECS = (TUMBLING_5M, HOPPING_5M_1M)
DEFAULT_RETENTION = 3600.0


@dataclass
class Aggregate:
    """count, sum, min and max of the values observed in one window."""

    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def merge(self, other: Aggregate) -> None:
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    def as_dict(self) -> dict[str, float | None]:
        return {"count": self.count, "sum": self.total, "min": self.low, "max": self.high,
                "mean": self.total / self.count if self.count else None}


# (measure, key, spec name, window start) -> aggregate
Cell = tuple[str, Key, str, float]


@dataclass
class WindowedStats:
    """Aggregates per (measure, key, window). ``observe`` is the only way in."""

    specs: tuple[WindowSpec, ...] = DEFAULT_SPECS
    retention: float = DEFAULT_RETENTION
    cells: dict[Cell, Aggregate] = field(default_factory=dict)
    newest: float = -math.inf
    _pruned_at: float = -math.inf

    def observe(self, measure: str, key: Key, at: float, value: float) -> None:
        """Add ``value`` to every window containing event time ``at``; too old to keep: ignored."""
        if at < self.newest - self.retention:
            return
        for spec in self.specs:
            for start in spec.starts(at):
                cell = (measure, key, spec.name, start)
                aggregate = self.cells.get(cell)
                if aggregate is None:
                    aggregate = self.cells[cell] = Aggregate()
                aggregate.add(value)
        if at > self.newest:
            self.newest = at
            self._prune()

    def _prune(self) -> None:
        # At most once per minute of event time: pruning walks every cell.
        if self.newest - self._pruned_at < 60.0:
            return
        self._pruned_at = self.newest
        sizes = {spec.name: spec.size for spec in self.specs}
        horizon = self.newest - self.retention
        self.cells = {cell: aggregate for cell, aggregate in self.cells.items()
                      if cell[3] + sizes[cell[2]] > horizon}


def merged(stats: list[WindowedStats]) -> dict[Cell, Aggregate]:
    """The cells of several partitions' stats added together (e.g. one queue seen by many DAGs)."""
    result: dict[Cell, Aggregate] = {}
    for part in stats:
        for cell, aggregate in part.cells.items():
            result.setdefault(cell, Aggregate()).merge(aggregate)
    return result


def table(cells: dict[Cell, Aggregate], sizes: dict[str, float]) -> list[dict[str, object]]:
    """Cells as JSON-ready rows, ordered by measure, key, window kind and start."""
    return [{"measure": measure, "key": list(key), "window": name, "start": start, "end": start + sizes[name],
             **aggregate.as_dict()}
            for (measure, key, name, start), aggregate in sorted(cells.items())]
