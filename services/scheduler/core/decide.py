"""decide(state, now, policy) -> events: what the owner of a partition does next.

Pure: time, the scheduler's id and the executors' answers come in as arguments.
The events returned are committed by the shell and then folded with ``evolve``.
Each DAG is decided on its own (quarantine.Guard): one whose decision raises is quarantined, and
nothing more is decided for a quarantined DAG; the others go on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from schemas import (
    CommandRejected,
    DagQuarantined,
    DagQuarantineLifted,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    SensorTimedOut,
    TaskCleared,
    TaskDeclaredDead,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskFailed,
    TaskKillRequested,
    TaskMapExpanded,
    TaskMapFailed,
    TaskQueued,
    TaskRemoved,
    TaskRescheduled,
    TaskRetryScheduled,
    TaskSkipped,
    TaskUpstreamFailed,
    TimeSensorMet,
)
from services.scheduler.core import time_sensors
from services.scheduler.core.assets import AssetDecision, decide_assets
from services.scheduler.core.backfill import BackfillDecision, decide_backfills
from services.scheduler.core.decide_mapped import decide_mapped, expand
from services.scheduler.core.external import (
    ExternalDecision,
    cancelled,
    decide_answers,
    decide_deferral,
    decide_deferred,
    decide_wait_after_success,
    waits_after_success,
)
from services.scheduler.core.limits import admit, walk_with_siblings
from services.scheduler.core.liveness import Evidence, dead_tries, declared_dead, due_retries
from services.scheduler.core.mapping import (
    mapped_over,
)
from services.scheduler.core.markers import MarkerDecision, decide_marker_clears
from services.scheduler.core.model import (
    ACTIVE,
    CLEAR,
    DEFERRED,
    ENDED,
    FAILED,
    NONE,
    POKED,
    QUEUED,
    SKIPPED,
    SUCCESS,
    UP_FOR_RETRY,
    UPSTREAM_FAILED,
    AssetSides,
    DagEntry,
    DagRun,
    RunKey,
    SchedulerState,
    TaskInstance,
    TryKey,
)
from services.scheduler.core.operations import (
    Removal,
    decide_deleted_dag_run,
    decide_rejections,
    decide_removed_tasks,
    stop,
)
from services.scheduler.core.pods import failed_with_pod, pod_ended_without_outcome
from services.scheduler.core.pools import PoolDecision, decide_grants, decide_releases, gate
from services.scheduler.core.quarantine import Guard, decide_quarantines
from services.scheduler.core.queuing import (
    Candidate,
    CandidateGroup,
    Previous,
    Queuing,
    no_previous,
    previous_success,
)
from services.scheduler.core.retries import retry_delay
from services.scheduler.core.run_deadlines import due_timeouts
from services.scheduler.core.runs import decide_runs
from services.scheduler.core.segments import Segment
from services.scheduler.core.sensors import decide_poked, retries_used
from services.scheduler.core.timeouts import TimeoutDecision, decide_dagrun_timeout
from services.scheduler.core.together import decide_together, fresh_state
from services.scheduler.core.trigger_rules import GIVE_UP, RUN, SKIP, Verdict, judge, judged_alike


@dataclass(frozen=True, slots=True)
class Policy:
    """Who decides and the limits it decides by."""

    scheduler_id: str
    heartbeat_timeout: float
    start_timeout: float | None = None  # launched, not started: None = the heartbeat timeout


_Instance: TypeAlias = (TaskRetryScheduled | TaskUpstreamFailed | TaskSkipped | TaskEmptySucceeded | TaskMapExpanded
                        | TaskMapFailed | TaskRemoved | TaskRescheduled | SensorTimedOut | ExternalDecision
                        | TimeSensorMet)
_OfTry: TypeAlias = TaskDeclaredDead | TaskFailed | TaskKillRequested | TaskCleared
_OfRun: TypeAlias = Removal | DagRunReopened | DagRunFinished | TimeoutDecision

InstanceDecision: TypeAlias = Candidate | _Instance
"""What deciding a task instance whose try is not running writes (a try to queue as a Candidate)."""

TaskDecision: TypeAlias = InstanceDecision | _OfTry
"""What deciding one task of a run writes: the above, or its try's end, stop or clear."""

Walked: TypeAlias = TaskDecision | CandidateGroup | _OfRun
"""What walking one open run decides (``_walk_run``, ``decide_deleted_dag_run``): its tries to queue as
candidates (alone, or a segment's together), built once the limits admit them."""

RunDecision: TypeAlias = TaskQueued | _Instance | _OfTry | _OfRun
"""What walking one open run writes (``decide_run``)."""

Decision: TypeAlias = (RunDecision | DagRunCreated | CommandRejected | BackfillDecision | DagQuarantined
                       | DagQuarantineLifted | PoolDecision | AssetDecision | ExternalDecision | MarkerDecision)
"""Everything ``decide`` writes: all of it to tock.events."""


def decide(state: SchedulerState, now: float, policy: Policy,
           touched: Collection[RunKey] | None = None, evidence: Evidence | None = None) -> list[Decision]:
    """New runs, then each run's task decisions. ``touched`` limits the walk to runs whose
    events arrived since the last decision (None: every run); timers are always checked.
    Without ``evidence`` nothing is declared dead. The tries queued are those their DAG's and
    task's limits admit, by priority (limits.py)."""
    guard = Guard(state)
    events: list[Decision] = [*decide_quarantines(state, now, policy.scheduler_id)]
    events += decide_runs(state, now, policy.scheduler_id, guard)
    events += decide_backfills(state, now, policy.scheduler_id, guard)
    events += decide_rejections(state, now, policy.scheduler_id)
    dead = dead_tries(state, evidence, policy.heartbeat_timeout, policy.start_timeout) if evidence is not None \
        else set()
    walked: list[Decision | Walked] = [*events]
    for run in _runs_to_walk(state, now, touched, dead):
        if guard.skips(run.dag_id):
            continue
        with guard.of(run.dag_id):
            walked.extend(_decide_open_run(state, run, now, policy, dead))
    # Pools: releases first (an ask of the same try may follow them), then the gate, then the grants of
    # the pools whose partition this is.
    releases = decide_releases(state, now)
    gated = gate(state, _built(admit(state, walked), guard), now)
    return [*releases, *guard.kept(gated, now, policy.scheduler_id), *decide_grants(state.pools, policy.scheduler_id,
                                                                                     now),
            *decide_assets(state, now), *decide_answers(state, now, touched), *decide_marker_clears(state, now)]


def _built(events: list[Decision | Walked], guard: Guard) -> list[Decision]:
    """``events`` with each candidate admitted built into its TaskQueued (a DAG whose building raises is
    quarantined, as one whose walk raises)."""
    built: list[Decision] = []
    for event in events:
        assert not isinstance(event, CandidateGroup), "admit replaces each group by the candidates it admits"
        if not isinstance(event, Candidate):
            built.append(event)
        elif not guard.skips(event.dag_id):
            with guard.of(event.dag_id):
                built.append(event.built())
    return built


def _decide_open_run(state: SchedulerState, run: DagRun, now: float, policy: Policy,
                     dead: Collection[TryKey]) -> list[Walked]:
    dag, gone = state.dags.get(run.dag_id), state.removed_dags.get(run.dag_id)
    if dag is not None:
        timed_out = decide_dagrun_timeout(run, dag, now, policy, dead, run.dag_id in state.paused)
        if timed_out is not None:
            return [*timed_out]
        return _walk_run(run, dag, now, policy, dead, paused=run.dag_id in state.paused,
                         previous=lambda: previous_success(state, dag, run), assets=state.assets)
    if gone is not None:
        return [*decide_deleted_dag_run(run, gone, now, policy, dead)]
    return []


def decide_run(run: DagRun, dag: DagEntry, now: float, policy: Policy,
               dead: Collection[TryKey] = (), *, paused: bool = False,
               previous: Previous = no_previous, assets: AssetSides | None = None) -> list[RunDecision]:
    """Walk the run's tasks in topological order, deciding each against its upstream's outcome.
    ``previous()``: the data interval of the DAG's latest successful run before this one, for the
    context of the tries it queues (asked only when one is queued); ``assets``: the partition's, whose
    latest events of its inlets a try of a task with inlets reads."""
    decided: list[RunDecision] = []
    for event in _walk_run(run, dag, now, policy, dead, paused=paused, previous=previous, assets=assets):
        if isinstance(event, CandidateGroup):
            decided += [event.candidate(member).built() for member in event.members]
        else:
            decided.append(event.built() if isinstance(event, Candidate) else event)
    return decided


def _walk_run(run: DagRun, dag: DagEntry, now: float, policy: Policy, dead: Collection[TryKey], *, paused: bool,
              previous: Previous, assets: AssetSides | None) -> list[Walked]:
    """``decide_run``, each try to queue left a Candidate."""
    queuing = Queuing(run, dag, policy.scheduler_id, previous, assets)
    view: dict[str, str] = {}
    events: list[Walked] = []
    if run.reopened_by is not None:
        events.append(DagRunReopened(dag_id=run.dag_id, run_id=run.run_id, request_id=run.reopened_by, at=now))
    segments, order, index = dag.segments if TOGETHER else {}, dag.order, 0
    while index < len(order):
        task_id = order[index]
        segment = segments.get(task_id)
        if segment is not None:
            events += _decide_segment(queuing, segment, view, now, policy, dead, paused)
            index += segment.size
            continue
        if dag.tasks[task_id].mapped is not None:
            decided, view[task_id] = _decide_mapped(queuing, task_id, view, now, policy, dead, paused)
        else:
            instance = run.tasks.get(task_id) or TaskInstance(task_id)
            decided, view[task_id] = _decide_task(queuing, instance, view, now, policy, dead, paused)
        events.extend(decided)
        index += 1
    events += decide_removed_tasks(run, dag, now, policy, dead)
    # A run ends when its tasks have, and no try of it (even of a removed task) still runs; it failed
    # when one of the tasks that decide its state did (Airflow's rule: a teardown's failure does not).
    if view and all(state in ENDED for state in view.values()) and not _still_running(run, dead):
        failed = any(view.get(task_id) in (FAILED, UPSTREAM_FAILED) for task_id in dag.leaves)
        events.append(DagRunFinished(dag_id=run.dag_id, run_id=run.run_id,
                                     state="failed" if failed else "success", at=now))
    return events


# Whether the walk decides a segment's tasks, and an expanded mapped task's instances, together (together.py;
# the tests' reference decider decides each on its own).
TOGETHER = True


def _decide_segment(queuing: Queuing, segment: Segment, view: dict[str, str], now: float, policy: Policy,
                    dead: Collection[TryKey], paused: bool) -> list[Walked]:
    """The tasks of a segment (segments.py), decided together (together.py)."""
    def decide_one(instance: TaskInstance) -> tuple[list[TaskDecision], str]:
        return _decide_task(queuing, instance, view, now, policy, dead, paused)

    fresh = fresh_state(queuing, segment.walked[0][0], view, paused)
    return [*decide_together(queuing, segment.walked, fresh, view, dead, decide_one, segment=segment, at=now)]


def _decide_task(queuing: Queuing, instance: TaskInstance, view: Mapping[str, str], now: float,
                 policy: Policy, dead: Collection[TryKey], paused: bool,
                 mapped: Mapping[str, Mapping[str, str]] | None = None) -> tuple[list[TaskDecision], str]:
    """(events, the instance's state once they are folded) for one task of the walk."""
    run = queuing.run
    events: list[TaskDecision] = []
    dead_try, pod_ended = (run.dag_id, run.run_id, instance.key) in dead, pod_ended_without_outcome(instance)
    if dead_try or pod_ended:
        events.append(failed_with_pod(run, instance, now) if pod_ended and not dead_try
                      else declared_dead(run, instance, now, policy.scheduler_id, policy.heartbeat_timeout,
                                         policy.start_timeout))
        if instance.pending:  # what a command asked for follows once the death is folded
            return events, instance.state
        instance = _as_failed(instance, now)
    elif instance.pending and instance.state in ACTIVE:
        return [*stop(run, instance, now, policy.scheduler_id)], instance.state
    if instance.pending == CLEAR:
        task = queuing.dag.tasks[instance.task_id]
        if instance.state == DEFERRED and task.external is not None:  # its wait on the other DAG, not wanted now
            events.append(cancelled(run, instance, task, "the sensor was cleared", now))
        events.append(TaskCleared(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                                  map_index=instance.map_index,
                                  try_number=instance.try_number, request_id=instance.pending_request, at=now))
        instance = TaskInstance(instance.task_id, try_number=instance.try_number, map_index=instance.map_index,
                                pokes=instance.pokes)
    decided, state = _decide_instance(queuing, instance, view, now, paused, mapped)
    return events + decided, state


def _decide_instance(queuing: Queuing, instance: TaskInstance, view: Mapping[str, str], now: float, paused: bool,
                     mapped: Mapping[str, Mapping[str, str]] | None = None) -> tuple[list[InstanceDecision], str]:
    """(events, the instance's state once they are folded). A paused DAG starts no new try. ``view`` and
    ``mapped``: the upstream states it is judged by (default: the walk's)."""
    run, task = queuing.run, queuing.dag.tasks[instance.task_id]
    if instance.state == NONE:
        verdict = judge(task.task_id, queuing.dag, run, view, mapped) if mapped is not None \
            else judged_alike(task.task_id, queuing.dag, run, view, queuing.mapped_states, queuing.verdicts)
        return _decide_waiting(queuing, instance, verdict, now, paused)
    ids: dict[str, Any] = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": task.task_id,
                           "map_index": instance.map_index}
    if instance.state == SUCCESS and instance.deferred_try < instance.try_number and waits_after_success(task):
        return [*decide_wait_after_success(run, instance, task, queuing.scheduler_id, now)], DEFERRED
    if instance.state == DEFERRED and task.time_wait is not None:
        due = time_sensors.decide_due(run, instance, task, time_sensors.moment_of(task, queuing.interval()[1]), now)
        return ([due[0]], due[1]) if due is not None else ([], DEFERRED)
    if instance.state == DEFERRED:
        timed_out = decide_deferred(run, instance, task, now)
        return ([*timed_out], timed_out[0].state) if timed_out is not None else ([], DEFERRED)
    if instance.state == POKED:
        decision = decide_poked(run, instance, task, now)
        return [decision], UP_FOR_RETRY if isinstance(decision, TaskRescheduled) else decision.state
    if instance.state == FAILED and instance.retryable and retries_used(instance) <= task.retries:
        ended = instance.ended_at if instance.ended_at is not None else now
        delay = retry_delay(task, run.dag_id, run.run_id, retries_used(instance))
        return [TaskRetryScheduled(**ids, try_number=instance.try_number, next_try_number=instance.try_number + 1,
                                   not_before=ended + delay, delay=delay, at=now)], UP_FOR_RETRY
    if instance.state == UP_FOR_RETRY and now >= (instance.not_before or 0.0) and not paused:
        return _queued(queuing, instance, task, now)
    return [], instance.state


def _decide_waiting(queuing: Queuing, instance: TaskInstance, verdict: Verdict, now: float,
                    paused: bool) -> tuple[list[InstanceDecision], str]:
    """A task instance not started in this run, as its upstreams' verdict says: written with the
    rule, the states and the choice that decided it, so the log says why a task did not run."""
    run, task = queuing.run, queuing.dag.tasks[instance.task_id]
    if verdict.outcome == RUN and not paused and task.kind != "empty" and (task.mapped is None
                                                                          or instance.map_index >= 0):
        return _queued(queuing, instance, task, now)  # the most frequent: first, without the words of a skip
    ids: dict[str, Any] = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": task.task_id,
                           "map_index": instance.map_index}
    why: dict[str, Any] = {"reason": verdict.reason, "trigger_rule": verdict.rule,
                           "upstream_states": dict(verdict.states)}
    if verdict.outcome == GIVE_UP:
        return [TaskUpstreamFailed(**ids, **why, at=now)], UPSTREAM_FAILED
    if verdict.outcome == SKIP:
        return [TaskSkipped(**ids, **why, chosen_by=verdict.chosen_by, at=now)], SKIPPED
    if verdict.outcome != RUN or paused:
        return [], instance.state
    if task.mapped is not None and instance.map_index < 0:  # a mapped task as a whole: expanded first
        expansion, state = expand(queuing, task, now)
        return [*expansion], state
    if task.kind == "empty":  # nothing to run: it succeeds here, without a try
        return [TaskEmptySucceeded(**ids, scheduler_id=queuing.scheduler_id, at=now)], SUCCESS
    return _queued(queuing, instance, task, now)


def _queued(queuing: Queuing, instance: TaskInstance, task: TaskDefinition,
            now: float) -> tuple[list[InstanceDecision], str]:
    """The instance's next try; an instance of a mapped task whose inputs no longer give its expansion
    is given up instead, saying why (Airflow marks such instances removed; here the log says it)."""
    if task.kind == "time_sensor":  # no try: a timer of this partition's
        moment = time_sensors.moment_of(task, queuing.interval()[1])
        decision, state = time_sensors.decide_start(queuing.run, instance, task, moment, queuing.scheduler_id, now)
        return [decision], state
    if task.kind == "external_sensor":  # no try: a wait on the other DAG's partition
        return [*decide_deferral(queuing.run, instance, task, queuing.scheduler_id, now)], DEFERRED
    stale = queuing.stale_expansion(task, instance.map_index)
    if not stale:
        return [Candidate(queuing, instance, task, now)], QUEUED
    run = queuing.run
    sources = {task_id: run.tasks[task_id].state if task_id in run.tasks else NONE
               for task_id in sorted(mapped_over(task))}
    return [TaskUpstreamFailed(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                               map_index=instance.map_index, reason=stale, trigger_rule=task.trigger_rule,
                               upstream_states=sources, at=now)], UPSTREAM_FAILED


def _decide_mapped(queuing: Queuing, task_id: str, view: Mapping[str, str], now: float, policy: Policy,
                   dead: Collection[TryKey], paused: bool) -> tuple[Sequence[Walked], str]:
    """A mapped task (decide_mapped.py), each instance decided as a task is here."""
    def decide_task(instance: TaskInstance, judged_by: Mapping[str, str],
                    mapped: Mapping[str, Mapping[str, str]] | None) -> tuple[list[TaskDecision], str]:
        return _decide_task(queuing, instance, judged_by, now, policy, dead, paused, mapped)

    return decide_mapped(queuing, task_id, view, dead, paused, decide_task, together=TOGETHER,
                         scheduler_id=policy.scheduler_id, now=now)


def _still_running(run: DagRun, dead: Collection[TryKey]) -> bool:
    return any(instance.state in ACTIVE and (run.dag_id, run.run_id, task_id) not in dead
               and not pod_ended_without_outcome(instance) for task_id, instance in run.tasks.items())


def _as_failed(instance: TaskInstance, now: float) -> TaskInstance:
    return TaskInstance(instance.task_id, FAILED, instance.try_number, ended_at=now)


# -- walking -------------------------------------------------------------------------------

def _runs_to_walk(state: SchedulerState, now: float, touched: Collection[RunKey] | None,
                  dead: set[TryKey]) -> list[DagRun]:
    if touched is None:
        return list(state.runs.values())
    keys = set(touched) | {key[:2] for key in dead}
    keys |= {key[:2] for key in due_retries(state, now)} | due_timeouts(state, now)
    return [state.runs[key] for key in sorted(walk_with_siblings(state, keys)) if key in state.runs]


