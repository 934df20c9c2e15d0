"""A DAG's ``dagrun_timeout``: a run still running that long after it started fails, as Airflow's.

The deadline is the run's creation (or its latest reopening: a clear runs it again, with a new
timeout) plus the timeout its DAG's definition gives now. It is a timer (``Timers.runs``): the run
is walked when it comes due, and its owner writes the decision, DagRunTimedOut, so a replay or a
takeover folds it rather than deciding again. With it, in the same turn and on every turn after
until the run ends:

- its queued and running tries are stopped through the kill path (TaskKillRequested, once; a try
  found dead is declared dead): each ends failed when its kill is in the log (a queued try no runner
  claimed at once), and is not retried;
- its task instances not started (waiting, up for retry) are skipped (TaskSkipped naming the
  timeout), as Airflow skips every unfinished task instance of a timed-out run;
- once no try of it runs, it finishes failed (DagRunFinished, its reason naming the timeout).

Airflow marks the running task instances skipped too and lets their heartbeat notice; Tock never
ends a try without its end in the log, so those end as killed (failed) instead. A paused DAG's runs
do not time out while it is paused (Airflow does not examine them either); they do once unpaused.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, TypeAlias

from schemas import (
    DagRunFinished,
    DagRunTimedOut,
    ExternalWaitCancelled,
    TaskDeclaredDead,
    TaskFailed,
    TaskKillRequested,
    TaskSkipped,
)
from services.scheduler.core.external import cancelled
from services.scheduler.core.liveness import declared_dead
from services.scheduler.core.model import (
    ACTIVE,
    DEFERRED,
    NONE,
    POKED,
    UP_FOR_RETRY,
    DagEntry,
    DagRun,
    SchedulerState,
    TaskInstance,
    TryKey,
)
from services.scheduler.core.operations import stop
from services.scheduler.core.pods import failed_with_pod, pod_ended_without_outcome
from services.scheduler.core.run_deadlines import started_at, timeout_deadline

if TYPE_CHECKING:  # decide.py imports this module
    from services.scheduler.core.decide import Policy

TimeoutDecision: TypeAlias = (DagRunTimedOut | TaskKillRequested | TaskDeclaredDead | TaskFailed | TaskSkipped
                              | DagRunFinished | ExternalWaitCancelled)
"""What a timed-out run's walk writes."""


def decide_dagrun_timeout(run: DagRun, dag: DagEntry, now: float, policy: Policy, dead: Collection[TryKey],
                          paused: bool) -> list[TimeoutDecision] | None:
    """The walk of a run that timed out (now, or before), or None: it has not (walk it as usual)."""
    if run.reopened_by is not None:
        return None  # reopened by a clear: DagRunReopened first, and its timeout counts from then
    if run.timed_out_at is not None:
        return _end_timed_out(run, dag, now, policy, dead, _reason(dag))
    deadline = timeout_deadline(run, dag)
    if paused or deadline is None or now < deadline:
        return None
    timed_out = DagRunTimedOut(dag_id=run.dag_id, run_id=run.run_id, started_at=started_at(run),
                               timeout=float(dag.definition.dagrun_timeout or 0.0),
                               scheduler_id=policy.scheduler_id, at=now)
    return [timed_out, *_end_timed_out(run, dag, now, policy, dead, _reason(dag))]


def _end_timed_out(run: DagRun, dag: DagEntry, now: float, policy: Policy, dead: Collection[TryKey],
                   reason: str) -> list[TimeoutDecision]:
    """Stop what runs, skip what did not start; fail the run once nothing of it runs."""
    events: list[TimeoutDecision] = []
    running = False
    for task_id in dict.fromkeys([*dag.order, *run.tasks]):
        instance = run.tasks.get(task_id) or TaskInstance(task_id)
        if (run.dag_id, run.run_id, task_id) in dead:
            events.append(declared_dead(run, instance, now, policy.scheduler_id, policy.heartbeat_timeout,
                                        policy.start_timeout))
        elif pod_ended_without_outcome(instance):
            events.append(failed_with_pod(run, instance, now))
        elif instance.state in ACTIVE:
            events += stop(run, instance, now, policy.scheduler_id, reason)
            running = running or bool(instance.runner_id)  # a try no runner claimed ends with its kill request
        elif instance.state in (NONE, UP_FOR_RETRY, POKED, DEFERRED):
            events.append(TaskSkipped(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, reason=reason,
                                      at=now))
            if instance.state == DEFERRED and task_id in dag.tasks and dag.tasks[task_id].external is not None:
                events.append(cancelled(run, instance, dag.tasks[task_id], reason, now))  # its wait, elsewhere
    if not running:
        events.append(DagRunFinished(dag_id=run.dag_id, run_id=run.run_id, state="failed", reason=reason, at=now))
    return events


def _reason(dag: DagEntry) -> str:
    return f"dagrun_timeout: the run ran longer than {dag.definition.dagrun_timeout:g} s"


# -- folds -------------------------------------------------------------------------------------

def timed_out(state: SchedulerState, event: DagRunTimedOut) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    if run is not None and run.timed_out_at is None:
        run.timed_out_at = event.at
