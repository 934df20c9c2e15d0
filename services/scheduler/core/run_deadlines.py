"""Runs' timeout deadlines (a DAG's ``dagrun_timeout``), on the timer heap ``Timers.runs``.

A run's entry is keyed like a try's, ``(dag_id, run_id, "")`` with try number 0. Its deadline is the
run's creation, or its latest reopening, plus the timeout its DAG's definition gives now; an entry is
a lower bound, checked against the run when it comes due (timers.py). What a timed-out run's owner
decides is in timeouts.py.
"""

from __future__ import annotations

from services.scheduler.core.model import DagEntry, DagRun, RunKey, SchedulerState, TryKey
from services.scheduler.core.timers import Current

RUN_TIMER = ""  # the task id of a run's entry in the timer heaps


def started_at(run: DagRun) -> float:
    """When the run's timeout counts from: its creation, or its latest reopening."""
    return run.reopened_at if run.reopened_at is not None else run.created_at


def timeout_deadline(run: DagRun, dag: DagEntry) -> float | None:
    """When the run times out (None: its DAG has no dagrun_timeout, or it timed out already)."""
    timeout = dag.definition.dagrun_timeout
    if timeout is None or run.timed_out_at is not None:
        return None
    return started_at(run) + timeout


def time_run(state: SchedulerState, run: DagRun) -> None:
    """File the run's timeout on the timer heap."""
    dag = state.dags.get(run.dag_id)
    deadline = timeout_deadline(run, dag) if dag is not None else None
    if deadline is not None:
        state.timers.runs.add(deadline, (run.dag_id, run.run_id, RUN_TIMER), 0)


def time_runs_of(state: SchedulerState, dag_id: str) -> None:
    """A new definition of the DAG: its open runs' timeouts may have changed (one made longer or dropped
    is found when its old entry comes due)."""
    dag = state.dags.get(dag_id)
    if dag is None or dag.definition.dagrun_timeout is None:
        return
    for (run_dag, _run_id), run in state.runs.items():
        if run_dag == dag_id:
            time_run(state, run)


def due_timeouts(state: SchedulerState, now: float) -> set[RunKey]:
    """Open runs whose timeout has come (and has not been decided yet)."""
    return {key[:2] for key in state.timers.runs.due(now, timeout_now(state), strictly=False)}


def timeout_now(state: SchedulerState) -> Current:
    """A run entry's deadline as the run stands now; None once it has none (ended, timed out, no timeout)."""
    def current(key: TryKey, _try_number: int) -> float | None:
        run, dag = state.runs.get(key[:2]), state.dags.get(key[0])
        return timeout_deadline(run, dag) if run is not None and dag is not None else None
    return current
