"""What the scheduler keeps of what it forgot, in a compact form; and its retention limits.

core/retention.py decides what is forgotten, and when: this module only holds it.

- ``Retention``: how many finished runs a DAG keeps (its definition may say otherwise) and how
  many command request ids a partition remembers. Configuration, not state: the shell builds it
  from the settings, and every fold of a partition must use the same (a replay, a snapshot and
  its tail, the live scheduler forget the same runs).
- ``DateSet``: logical dates as arithmetic progressions. The forgotten runs of a schedule are one
  progression per unbroken stretch (a year of per-minute runs is three numbers).
- ``ForgottenRuns``: one DAG's forgotten runs: the logical dates of its scheduled and backfill
  runs (their run ids are derived from them), and a 64-bit digest of any other run id (manual runs).
- ``RequestIds``: the request ids of the latest commands, oldest forgotten first.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from bisect import bisect_right, insort
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

DEFAULT_FINISHED_RUNS_KEPT = 100   # per DAG (TOCK_SCHEDULER_FINISHED_RUNS_KEPT)
DEFAULT_REQUEST_IDS_KEPT = 10_000  # per partition (TOCK_SCHEDULER_REQUEST_IDS_KEPT)


@dataclass(frozen=True, slots=True)
class Retention:
    """How much finished history the scheduler keeps (settings; the same for every fold)."""

    finished_runs_kept: int = DEFAULT_FINISHED_RUNS_KEPT  # per DAG, unless its definition says
    request_ids_kept: int = DEFAULT_REQUEST_IDS_KEPT      # per partition


class DateSet:
    """A set of logical dates (seconds since the epoch), most of them in few progressions.

    Whole seconds are kept as sorted, disjoint progressions ``start + k * step`` (k < count; a
    single date has step 0); any other date (a fraction of a second) is kept on its own.
    """

    __slots__ = ("counts", "loose", "starts", "steps")

    def __init__(self, starts: Iterable[int] = (), steps: Iterable[int] = (), counts: Iterable[int] = (),
                 loose: Iterable[float] = ()) -> None:
        self.starts, self.steps, self.counts = list(starts), list(steps), list(counts)
        self.loose = sorted(loose)
        if not len(self.starts) == len(self.steps) == len(self.counts):
            raise ValueError("a date set's progressions disagree in length")

    def __contains__(self, date: object) -> bool:
        if not isinstance(date, (int, float)) or not math.isfinite(date):
            return False
        if not float(date).is_integer():
            index = bisect_right(self.loose, date) - 1
            return index >= 0 and self.loose[index] == date
        return self._member(self._before(int(date)), int(date))

    def __len__(self) -> int:
        return sum(self.counts) + len(self.loose)

    def __iter__(self) -> Iterator[float]:
        whole = (float(start + index * step) for start, step, count in self.progressions()
                 for index in range(count))
        return iter(sorted([*whole, *self.loose]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DateSet) and self.packed() == other.packed()

    def __repr__(self) -> str:
        return f"DateSet({self.progressions()!r}, loose={self.loose!r})"

    def progressions(self) -> list[tuple[int, int, int]]:
        return list(zip(self.starts, self.steps, self.counts, strict=True))

    def packed(self) -> tuple[list[int], list[int], list[int], list[float]]:
        """Its fields, as ``DateSet(*packed)`` takes them (for snapshots)."""
        return self.starts, self.steps, self.counts, self.loose

    def add(self, date: float) -> None:
        if not math.isfinite(date) or date in self:
            return
        if not float(date).is_integer():
            insort(self.loose, date)
            return
        value = int(date)
        index = self._before(value)
        if index >= 0 and value < self._end(index):  # inside a progression's span: split it there
            index = self._split(index, value)
        if index >= 0 and self._extends(index, value):
            self._append(index, value)
            self._merge(index)
        elif index + 1 < len(self.starts) and self._precedes(index + 1, value):
            self._prepend(index + 1, value)
            if index >= 0:
                self._merge(index)
        else:
            for column, item in ((self.starts, value), (self.steps, 0), (self.counts, 1)):
                column.insert(index + 1, item)

    # -- progressions ---------------------------------------------------------------------------

    def _before(self, value: int) -> int:
        """The index of the last progression starting at or before ``value`` (-1: none)."""
        return bisect_right(self.starts, value) - 1

    def _end(self, index: int) -> int:
        return self.starts[index] + (self.counts[index] - 1) * self.steps[index]

    def _member(self, index: int, value: int) -> bool:
        if index < 0:
            return False
        offset, step = value - self.starts[index], self.steps[index]
        return offset == 0 if step == 0 else offset % step == 0 and offset // step < self.counts[index]

    def _split(self, index: int, value: int) -> int:
        """Cut progression ``index`` around ``value`` (inside its span, not a member); returns the
        index of the part before it."""
        start, step, count = self.starts[index], self.steps[index], self.counts[index]
        before = (value - start) // step + 1  # members below value
        after = count - before
        self.counts[index], self.steps[index] = before, step if before > 1 else 0
        self.starts.insert(index + 1, start + before * step)
        self.steps.insert(index + 1, step if after > 1 else 0)
        self.counts.insert(index + 1, after)
        return index

    def _extends(self, index: int, value: int) -> bool:
        count = self.counts[index]
        return count == 1 or self.starts[index] + count * self.steps[index] == value

    def _append(self, index: int, value: int) -> None:
        if self.counts[index] == 1:
            self.steps[index] = value - self.starts[index]
        self.counts[index] += 1

    def _precedes(self, index: int, value: int) -> bool:
        return self.counts[index] == 1 or self.starts[index] - self.steps[index] == value

    def _prepend(self, index: int, value: int) -> None:
        if self.counts[index] == 1:
            self.steps[index] = self.starts[index] - value
        self.starts[index] = value
        self.counts[index] += 1

    def _merge(self, index: int) -> None:
        """Join progression ``index`` with the next one when together they are one."""
        if index + 1 >= len(self.starts):
            return
        first, second = self.counts[index], self.counts[index + 1]
        step = self.steps[index] if first > 1 else self.steps[index + 1] if second > 1 else \
            self.starts[index + 1] - self.starts[index]
        if (self._end(index) + step == self.starts[index + 1] and (first == 1 or self.steps[index] == step)
                and (second == 1 or self.steps[index + 1] == step)):
            self.steps[index], self.counts[index] = step, first + second
            for column in (self.starts, self.steps, self.counts):
                del column[index + 1]


def run_id_digest(run_id: str) -> int:
    """64 bits of a run id: what is kept of a forgotten run whose id no date derives."""
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=8).digest(), "big")


@dataclass(slots=True)
class ForgottenRuns:
    """One DAG's forgotten runs: enough to know that a run existed, and no more."""

    scheduled: DateSet = field(default_factory=DateSet)  # logical dates of scheduled runs
    backfill: DateSet = field(default_factory=DateSet)   # logical dates of backfill runs
    others: array[int] = field(default_factory=lambda: array("Q"))  # sorted run_id_digest()s
    count: int = 0                                       # how many runs were forgotten

    def add_other(self, run_id: str) -> None:
        digest = run_id_digest(run_id)
        if not self.has_other(run_id):
            insort(self.others, digest)

    def has_other(self, run_id: str) -> bool:
        digest = run_id_digest(run_id)
        index = bisect_right(self.others, digest) - 1
        return index >= 0 and self.others[index] == digest


class RequestIds:
    """The request ids of the latest commands applied (or refused), at most ``keep`` of them:
    adding one more forgets the oldest."""

    __slots__ = ("_ids", "_order")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._order: deque[str] = deque()
        self._ids: set[str] = set()
        for request_id in ids:
            self.add(request_id)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._ids

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        """Oldest first."""
        return iter(self._order)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequestIds) and self._order == other._order

    def __repr__(self) -> str:
        return f"RequestIds({list(self._order)!r})"

    def add(self, request_id: str, keep: int | None = None) -> None:
        """Remember ``request_id``; then forget the oldest beyond ``keep`` (None: keep all)."""
        if request_id not in self._ids:
            self._ids.add(request_id)
            self._order.append(request_id)
        while keep is not None and len(self._order) > max(keep, 0):
            self._ids.discard(self._order.popleft())
