"""Tallies for the soak's report: what became of the long freezes (not promises, so not
violations; a tally of zero says a freeze did not reach what it was meant to test). Pure
functions over plain values, like tests/soak/checks.py."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from schemas import SchedulerHeartbeat, TaskDeclaredDead, TaskStarted
from tests.soak.checks import OUTCOMES, Outcome, TryKey, try_key


def frozen_runners(events: Sequence[object], freezes: Iterable[tuple[int, float, float]]) -> Counter:
    """What became of the tries of runners frozen past the heartbeat timeout. ``freezes``: (runner
    pid, frozen at, thawed at). A try is one of the runner's that had started (TaskStarted naming
    that pid) and not ended by the freeze; counts ``tries``, ``declared dead`` (during the freeze or
    after it), ``ended otherwise`` (its outcome read before a declaration), ``not ended``, and
    ``late outcomes`` (reported by the thawed runner after the declaration: recorded, not counted)."""
    counts: Counter = Counter()
    for pid, frozen_at, _thawed_at in freezes:
        started = {try_key(event) for event in events if isinstance(event, TaskStarted) and event.pid == pid
                   and event.at <= frozen_at}
        ends: dict[TryKey, list[Outcome]] = defaultdict(list)
        for event in events:
            if isinstance(event, OUTCOMES) and try_key(event) in started:
                ends[try_key(event)].append(event)
        for key in started:
            if any(end.at <= frozen_at for end in ends[key]):
                continue  # it had ended before the freeze: the runner was busy with another try
            counts["tries"] += 1
            first = ends[key][0] if ends[key] else None
            counts["not ended" if first is None else "declared dead" if isinstance(first, TaskDeclaredDead)
                   else "ended otherwise"] += 1
            counts["late outcomes"] += len(ends[key][1:]) if isinstance(first, TaskDeclaredDead) else 0
    return counts


def takeovers(beats: Sequence[SchedulerHeartbeat], freezes: Iterable[tuple[str, float, float]]) -> Counter:
    """Whether another scheduler took over while one was frozen past its session timeout.
    ``freezes``: (scheduler id, frozen at, thawed at). Counts ``frozen`` (owning partitions when it
    froze, as its last SchedulerHeartbeat before says) and ``taken over`` (another scheduler's
    heartbeat during the freeze names one of them)."""
    counts: Counter = Counter()
    for scheduler_id, frozen_at, thawed_at in freezes:
        owned = next((set(beat.partitions) for beat in reversed(beats)
                      if beat.scheduler_id == scheduler_id and beat.at <= frozen_at), set())
        if not owned:
            continue
        counts["frozen"] += 1
        counts["taken over"] += any(beat.scheduler_id != scheduler_id and frozen_at < beat.at <= thawed_at
                                    and owned & set(beat.partitions) for beat in beats)
    return counts
