"""decide(state, now, policy) -> events: what the owner of a partition does next.

Pure: time, the scheduler's id and the executors' answers come in as arguments.
The events returned are committed by the shell and then folded with ``evolve``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from schemas import (
    DagRunFinished,
    TaskAdopted,
    TaskDeclaredDead,
    TaskQueued,
    TaskRetryScheduled,
    TaskUpstreamFailed,
)
from services.scheduler.core.model import (
    ACTIVE,
    FAILED,
    NONE,
    QUEUED,
    SUCCESS,
    UP_FOR_RETRY,
    UPSTREAM_FAILED,
    DagEntry,
    DagRun,
    RunKey,
    SchedulerState,
    TaskInstance,
    TryKey,
)
from services.scheduler.core.runs import decide_runs


@dataclass(frozen=True, slots=True)
class Policy:
    """Who decides and the limits it decides by."""

    scheduler_id: str
    heartbeat_timeout: float


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the shell has seen of one partition's heartbeat log: the only grounds for a death.

    ``heard_until``: the partition of tock.heartbeats was read up to its end offset as fetched
    at that time, so every heartbeat written before then has been folded.
    ``reachable_since``: the log has been reachable without a break since then; runners that
    lost the broker get a whole timeout after it came back to deliver their backlog.
    """

    heard_until: float
    reachable_since: float = 0.0


def decide(state: SchedulerState, now: float, policy: Policy,
           touched: Collection[RunKey] | None = None, evidence: Evidence | None = None) -> list:
    """New runs, then each run's task decisions. ``touched`` limits the walk to runs whose
    events arrived since the last decision (None: every run); timers are always checked.
    Without ``evidence`` nothing is declared dead."""
    events: list = decide_runs(state, now, policy.scheduler_id)
    dead = dead_tries(state, evidence, policy.heartbeat_timeout) if evidence is not None else set()
    for run in _runs_to_walk(state, now, touched, dead):
        dag = state.dags.get(run.dag_id)
        if dag is not None:
            events.extend(decide_run(run, dag, now, policy, dead))
    return events


def decide_run(run: DagRun, dag: DagEntry, now: float, policy: Policy,
               dead: Collection[TryKey] = ()) -> list:
    """Walk the run's tasks in topological order, deciding each against its upstream's outcome."""
    view: dict[str, str] = {}
    events: list = []
    for task_id in dag.order:
        instance = run.tasks.get(task_id) or TaskInstance(task_id)
        if (run.dag_id, run.run_id, task_id) in dead:
            events.append(_declared_dead(run, instance, now, policy))
            instance = _as_failed(instance, now)
        ups = [view[up] for up in dag.tasks[task_id].upstream if up in view]
        decided, view[task_id] = _decide_instance(run, dag, instance, ups, now, policy)
        events.extend(decided)
    if view and all(state in _DONE for state in view.values()):
        failed = any(state != SUCCESS for state in view.values())
        events.append(DagRunFinished(dag_id=run.dag_id, run_id=run.run_id,
                                     state="failed" if failed else "success", at=now))
    return events


def _decide_instance(run: DagRun, dag: DagEntry, instance: TaskInstance, ups: list[str],
                     now: float, policy: Policy) -> tuple[list, str]:
    """(events, the instance's state once they are folded)."""
    task = dag.tasks[instance.task_id]
    if instance.state == NONE:
        if any(up in (FAILED, UPSTREAM_FAILED) for up in ups):
            return [TaskUpstreamFailed(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                                       at=now)], UPSTREAM_FAILED
        if all(up == SUCCESS for up in ups):
            return [_queued(run, instance, task, now, policy)], QUEUED
    elif instance.state == FAILED and instance.retryable and instance.try_number <= task.retries:
        ended = instance.ended_at if instance.ended_at is not None else now
        return [TaskRetryScheduled(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                                   try_number=instance.try_number, next_try_number=instance.try_number + 1,
                                   not_before=ended + task.retry_delay, at=now)], UP_FOR_RETRY
    elif instance.state == UP_FOR_RETRY and now >= (instance.not_before or 0.0):
        return [_queued(run, instance, task, now, policy)], QUEUED
    return [], instance.state


def _queued(run: DagRun, instance: TaskInstance, task, now: float, policy: Policy) -> TaskQueued:
    return TaskQueued(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                      try_number=instance.try_number + 1, executor=task.executor, queue=task.queue,
                      scheduler_id=policy.scheduler_id, at=now)


def _declared_dead(run: DagRun, instance: TaskInstance, now: float, policy: Policy) -> TaskDeclaredDead:
    return TaskDeclaredDead(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                            try_number=instance.try_number, last_heartbeat_at=instance.last_heartbeat_at,
                            reason=f"no heartbeat for {policy.heartbeat_timeout:g} s",
                            scheduler_id=policy.scheduler_id, at=now)


def _as_failed(instance: TaskInstance, now: float) -> TaskInstance:
    return TaskInstance(instance.task_id, FAILED, instance.try_number, ended_at=now)


_DONE = frozenset({SUCCESS, FAILED, UPSTREAM_FAILED})


# -- timers ----------------------------------------------------------------------------------

def silence_deadline(instance: TaskInstance, timeout: float) -> float | None:
    """When a launched or started try counts as dead if nothing more is heard from it."""
    seen = [at for at in (instance.launched_at, instance.started_at, instance.last_heartbeat_at,
                          instance.adopted_at) if at is not None]
    return max(seen) + timeout if seen else None


def overdue_tries(state: SchedulerState, at: float, timeout: float, reachable_since: float = 0.0) -> set[TryKey]:
    """Live tries that had been silent past the heartbeat timeout at ``at`` (and for a whole
    timeout since the log became reachable again)."""
    overdue = set()
    for key in state.live:
        instance = state.instance(key)
        if instance is None or instance.state not in ACTIVE:
            continue
        deadline = silence_deadline(instance, timeout)
        if deadline is not None and at > max(deadline, reachable_since + timeout):
            overdue.add(key)
    return overdue


def dead_tries(state: SchedulerState, evidence: Evidence, timeout: float) -> set[TryKey]:
    """Live tries proven silent: overdue as of the point up to which their heartbeats were read."""
    return overdue_tries(state, evidence.heard_until, timeout, evidence.reachable_since)


def next_wakeup(state: SchedulerState, timeout: float, now: float) -> float | None:
    """The earliest time after ``now`` a retry falls due or a live try's silence deadline passes.

    Times already past are left out: what is due is decided on every turn, and a time a
    decision cannot act on (a retry of a run whose DAG is gone, a death still waiting for
    evidence) must not turn the loop into a spin."""
    times = [instance.not_before for key in state.waiting
             if (instance := state.instance(key)) is not None and instance.not_before is not None]
    times += [deadline for key in state.live
              if (instance := state.instance(key)) is not None
              and (deadline := silence_deadline(instance, timeout)) is not None]
    return min((time for time in times if time > now), default=None)


def _runs_to_walk(state: SchedulerState, now: float, touched: Collection[RunKey] | None,
                  dead: set[TryKey]) -> list[DagRun]:
    if touched is None:
        return list(state.runs.values())
    keys = set(touched) | {key[:2] for key in dead}
    keys |= {key[:2] for key in state.waiting
             if (instance := state.instance(key)) is not None and now >= (instance.not_before or 0.0)}
    return [state.runs[key] for key in sorted(keys) if key in state.runs]


# -- adoption --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Orphan:
    """A try the new owner must ask its executor about: executor from TaskQueued, handle from TaskLaunched."""

    key: TryKey
    try_number: int
    executor: str
    handle: str
    owner: str


def orphans(state: SchedulerState, scheduler_id: str) -> list[Orphan]:
    """Unfinished launched tries owned by another scheduler: what a takeover must probe."""
    found = []
    for key in state.live:
        instance = state.instance(key)
        if instance is not None and instance.state in ACTIVE and instance.owner != scheduler_id:
            found.append(Orphan(key, instance.try_number, instance.executor, instance.handle, instance.owner))
    return found


def decide_adoption(state: SchedulerState, now: float, scheduler_id: str,
                    alive: Mapping[TryKey, bool | None]) -> list[TaskAdopted]:
    """TaskAdopted for each orphan its executor found alive. The others are left to the heartbeat
    deadline (``dead_tries``), so a try is never declared dead before it fell silent."""
    events = []
    for orphan in orphans(state, scheduler_id):
        if alive.get(orphan.key) is True:
            dag_id, run_id, task_id = orphan.key
            events.append(TaskAdopted(dag_id=dag_id, run_id=run_id, task_id=task_id,
                                      try_number=orphan.try_number, handle=orphan.handle,
                                      by_scheduler=scheduler_id, from_scheduler=orphan.owner, at=now))
    return events
