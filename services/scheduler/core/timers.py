"""When live tries fall silent, retries fall due and runs time out, kept in heaps so no turn scans
every try (or run).

The fold (``evolve``) only says which tries to time (``Timers.watch`` / ``Timers.retry``); the
silence deadlines depend on the policy's timeouts, so the liveness queries, which are given
those timeouts, compute them (``liveness.py``).

A heap entry's deadline is a lower bound: a try's silence deadline only moves later (a
heartbeat, an adoption) except when its runner starts, and the start is watched again (the
start timeout gives way to the heartbeat timeout, which may come earlier). So an entry that
comes due is checked against the try as it is now: due, filed again at its later deadline, or
dropped (the try ended, or a newer entry for it exists). Heartbeats push nothing: a try that
keeps beating costs one check per timeout. Tries that ended leave their entries behind until
those come due: at most a timeout's worth.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

TryKey = tuple[str, str, str]
Ident = tuple[TryKey, int]         # (try key, try number)
Entry = tuple[float, TryKey, int]  # (deadline, try key, try number)
Current = Callable[[TryKey, int], "float | None"]  # a try's deadline now; None once it has none


@dataclass(slots=True)
class Deadlines:
    """A heap of deadlines to come, and the ones already passed (kept apart, so a turn with many
    tries past due, e.g. waiting for evidence of their death, does not churn the heap)."""

    heap: list[Entry] = field(default_factory=list)
    passed: dict[Ident, float] = field(default_factory=dict)

    def add(self, deadline: float, key: TryKey, try_number: int) -> None:
        heapq.heappush(self.heap, (deadline, key, try_number))

    def due(self, at: float, current: Current, *, strictly: bool) -> list[TryKey]:
        """Tries whose deadline is before ``at`` (``strictly``) or at it."""
        self._settle(at, current)
        return [key for (key, _try), deadline in self.passed.items()
                if deadline < at or (deadline == at and not strictly)]

    def next_after(self, now: float, current: Current) -> float | None:
        """The earliest deadline later than ``now``."""
        self._settle(now, current)
        heap = self.heap
        while heap:
            deadline, key, try_number = heap[0]
            real = current(key, try_number)
            if real == deadline:
                return deadline
            heapq.heappop(heap)
            if real is not None and real > deadline:
                heapq.heappush(heap, (real, key, try_number))  # a lower bound: filed again at the real time
        return None

    def clear(self) -> None:
        self.heap, self.passed = [], {}

    def _settle(self, upto: float, current: Current) -> None:
        """Entries due by ``upto`` move to ``passed`` at their current deadline; passed ones that
        are no longer due by then (re-timed, or asked about an earlier time) go back on the heap."""
        heap, passed = self.heap, self.passed
        while heap and heap[0][0] <= upto:
            deadline, key, try_number = heapq.heappop(heap)
            real = current(key, try_number)
            if real is None or real < deadline:
                continue  # void (the try ended), or outdated by a newer entry of the same try
            if real > upto:
                heapq.heappush(heap, (real, key, try_number))
            else:
                passed[(key, try_number)] = real
        for ident, deadline in list(passed.items()):
            real = current(*ident)
            if real is None:
                del passed[ident]
            elif real > upto:
                del passed[ident]
                heapq.heappush(heap, (real, *ident))
            elif real != deadline:
                passed[ident] = real


@dataclass(slots=True)
class Timers:
    """Derived from the fold; rebuilt after a restore, never compared."""

    fresh: dict[TryKey, int] = field(default_factory=dict)  # tries to time at the next query -> try number
    silence: Deadlines = field(default_factory=Deadlines)
    retries: Deadlines = field(default_factory=Deadlines)
    runs: Deadlines = field(default_factory=Deadlines)  # runs' dagrun_timeout, keyed (dag_id, run_id, "")

    def watch(self, key: TryKey, try_number: int) -> None:
        """A try became live, or its runner started: time it (again) at the next query."""
        self.fresh[key] = try_number

    def forget(self, key: TryKey) -> None:
        """The try ended: nothing to time (a replay of a long history folds many tries between queries)."""
        self.fresh.pop(key, None)

    def retry(self, key: TryKey, try_number: int, not_before: float) -> None:
        self.retries.add(not_before, key, try_number)

    def file_fresh(self, deadline_of: Current) -> None:
        """Put the tries to time on the silence heap, at their deadline as of now."""
        for key, try_number in self.fresh.items():
            deadline = deadline_of(key, try_number)
            if deadline is not None:
                self.silence.add(deadline, key, try_number)
        self.fresh.clear()

    def clear(self) -> None:
        self.fresh = {}
        self.silence.clear()
        self.retries.clear()
        self.runs.clear()
