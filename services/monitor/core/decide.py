"""``decide``: which open runs have passed their DAG's deadline without a DeadlineMissed in the log,
and which task instances of open runs have passed their task's deadline, not ended, without a
TaskDeadlineMissed in the log.

The shell calls it only for partitions it owns and has read up to their end (see
services/monitor/shell.py), and folds each committed decision at once, so a run gets one
DeadlineMissed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from schemas import DeadlineMissed, TaskDeadlineMissed
from services.monitor.core.state import LATE_MISS_HORIZON, MonitorState, TaskKey, run_deadline


def decide(state: MonitorState, now: float) -> list[DeadlineMissed | TaskDeadlineMissed]:
    """A DeadlineMissed for each open run whose start (or, for a scheduled run of a DAG whose deadline
    counts from it, logical date) + its DAG's deadline is at or before ``now``
    and that has none yet. ``deadline`` in the event is that moment (seconds since the epoch).
    Also, late, one for each run that ended past its deadline with none in the log (no monitor
    saw it in time), if that deadline is within LATE_MISS_HORIZON of ``now``."""
    misses = [DeadlineMissed(dag_id=dag_id, run_id=run_id, deadline=deadline, at=now)
              for (dag_id, run_id), deadline in state.finished_late.items() if now - deadline <= LATE_MISS_HORIZON]
    for (dag_id, run_id), clock in state.runs.items():
        deadline = None if clock.missed else run_deadline(state, dag_id, clock)
        if deadline is not None and deadline <= now:
            misses.append(DeadlineMissed(dag_id=dag_id, run_id=run_id, deadline=deadline, at=now))
    return misses + decide_task_misses(state, now)


def decide_task_misses(state: MonitorState, now: float) -> list[TaskDeadlineMissed]:
    """A TaskDeadlineMissed for each task instance of an open run, not ended, whose first TaskQueued
    + its task's deadline is at or before ``now``, and that has none yet. (A task instance that ended
    late while no monitor was there gets none: only runs are owed late misses.)"""
    return [TaskDeadlineMissed(dag_id=dag_id, run_id=run_id, task_id=task_id, deadline=deadline, at=now)
            for (dag_id, run_id, task_id), deadline in open_task_deadlines(state) if deadline <= now]


def open_task_deadlines(state: MonitorState) -> Iterator[tuple[TaskKey, float]]:
    """(task instance key, its deadline) of every task instance still owed a miss if it runs late."""
    for (dag_id, run_id, task_id), clock in state.tasks.items():
        seconds = state.task_deadlines.get(dag_id, {}).get(task_id)
        if seconds is not None and not clock.ended and not clock.missed:
            yield (dag_id, run_id, task_id), clock.queued_at + seconds


def next_deadline(state: MonitorState) -> float:
    """The earliest deadline of an open run still to come or due (inf when none): how long the shell
    may sleep. Late misses of ended runs are decided at every turn and need no wake-up."""
    # A run has a deadline exactly when its DAG declares one (``state.deadlines``).
    runs = min((deadline for (dag_id, _run), clock in state.runs.items()
                if not clock.missed and (deadline := run_deadline(state, dag_id, clock)) is not None),
               default=math.inf)
    return min(runs, min((deadline for _task, deadline in open_task_deadlines(state)), default=math.inf))
