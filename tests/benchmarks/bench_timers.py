"""Deadlines in heaps: the cost of one scheduler turn's timer queries with many live tries.

Pure core, synthetic state (no broker): N tries launched, started and heartbeating, then the
queries one turn makes (``next_wakeup``, ``overdue_tries``, the due retries) timed against the
scans of every live and waiting try they replaced (kept as the unit test's oracle).
"""

from __future__ import annotations

import time

from schemas import TaskHeartbeat
from services.scheduler.core import SchedulerState, evolve, next_wakeup, overdue_tries
from services.scheduler.core.liveness import due_retries
from tests.benchmarks.common import figure
from tests.benchmarks.w3_takeover import load
from tests.unit.scheduler_fixtures import created, launched, parsed, queued, started
from tests.unit.test_scheduler_timers import scanned_overdue, scanned_retries, scanned_wakeup

TIMEOUT = 30.0
TURNS = 200


def live_state(tries: int, started_at: float) -> SchedulerState:
    tasks = [f"t{index}" for index in range(tries)]
    state = SchedulerState()
    for event in (parsed(edges={task: [] for task in tasks}), created()):
        evolve(state, event)
    for index, task in enumerate(tasks):
        at = started_at + index * 0.001
        for event in (queued(task, at=at), launched(task, at=at), started(task, at=at)):
            evolve(state, event)
    return state


def per_turn(state: SchedulerState, tries: int, queries) -> float:
    """Seconds of timer queries per turn. Each turn first folds the heartbeats a turn reads
    when every try beats every 5 s and turns come 10 a second (not timed)."""
    beats_per_turn = max(1, tries // 50)
    spent = 0.0
    for turn in range(TURNS):
        now = 200.0 + turn * 0.1
        for beat in range(beats_per_turn):
            task = f"t{(turn * beats_per_turn + beat) % tries}"
            evolve(state, TaskHeartbeat(dag_id="etl", run_id="manual__r1", task_id=task, try_number=1,
                                        runner_id="r", at=now))
        started_at = time.perf_counter()
        queries(state, now)
        spent += time.perf_counter() - started_at
    return spent / TURNS


def heap_queries(state, now):
    next_wakeup(state, TIMEOUT, now)
    overdue_tries(state, now, TIMEOUT)
    due_retries(state, now)


def scan_queries(state, now):
    scanned_wakeup(state, TIMEOUT, now, None)
    scanned_overdue(state, now, TIMEOUT, 0.0, None)
    scanned_retries(state, now)


def main() -> None:
    print(f"  (pure core, synthetic state of started tries; {load()})")
    cases = (("heartbeating", 195.0), ("all past due, no evidence yet", 100.0))
    for label, started_at in cases:
        for tries in (200, 2_000, 20_000):
            heap = per_turn(live_state(tries, started_at), tries, heap_queries)
            scan = per_turn(live_state(tries, started_at), tries, scan_queries)
            figure(f"timers per turn, {tries:,} tries {label}: heaps", heap * 1e6, "µs")
            figure(f"timers per turn, {tries:,} tries {label}: scan (before)", scan * 1e6, "µs")


if __name__ == "__main__":
    main()
