"""evolve(state, event) -> state: one small handler per event type.

The state is mutated in place and returned: it is owned by the fold (``decide`` only
reads it), and copying a partition's memory per event would cost more than it protects.
Events of a try that is no longer current, of a finished run, or repeated, change nothing.
A handler that raises for an event of DAG d quarantines d (quarantine.py): never the partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Never, NoReturn, TypeAlias

from schemas import (
    AssetConsumerDropped,
    AssetConsumerRegistered,
    AssetEventForwarded,
    AssetEventQueued,
    AssetEventRecorded,
    AssetReaderCaughtUp,
    AssetReaderDropped,
    AssetReaderRegistered,
    BackfillFinished,
    BackfillPlanned,
    CallbackCalled,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    DagAssetsRegistered,
    DagParsed,
    DagQuarantined,
    DagQuarantineLifted,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DagRunTimedOut,
    DeadlineMissed,
    DeletePool,
    ExternalClearsSent,
    ExternalTaskReported,
    ExternalWaitAccepted,
    ExternalWaitAnswered,
    ExternalWaitCancelled,
    ExternalWaitRequested,
    InletEventDelivered,
    KillTask,
    MarkTask,
    PauseDag,
    PodFinished,
    PodStarted,
    PoolSlotsGranted,
    PoolSlotsReleased,
    PoolSlotsRequested,
    RequestBackfill,
    SecretAccessed,
    SensorTimedOut,
    SetPool,
    TaskAdopted,
    TaskAssetEventsRecorded,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskDeferred,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskMapExpanded,
    TaskMapFailed,
    TaskPoked,
    TaskPoolGranted,
    TaskPoolReleased,
    TaskPoolRequested,
    TaskQueued,
    TaskRemoved,
    TaskRescheduled,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TaskUpstreamFailed,
    TimeSensorMet,
    TriggerDagRun,
)
from services.scheduler.core import (
    assets,
    commands,
    external,
    mapping,
    markers,
    pools,
    quarantine,
    retention,
    sensors,
    time_sensors,
    timeouts,
)
from services.scheduler.core.instances import end_try, forget_try, now_live
from services.scheduler.core.model import (
    ACTIVE,
    FAILED,
    NONE,
    QUEUED,
    RUNNING,
    SKIPPED,
    SUCCESS,
    UP_FOR_RETRY,
    UPSTREAM_FAILED,
    DagEntry,
    DagRun,
    DagTombstone,
    RunnerEvent,
    SchedulerEvent,
    SchedulerState,
    TaskInstance,
    TryEnded,
    TryEvent,
    TryKey,
    instance_key,
)
from services.scheduler.core.pods import pod_failure
from services.scheduler.core.run_deadlines import time_run, time_runs_of
from services.scheduler.core.runs import first_due


class UnknownEvent(TypeError):
    """The scheduler's fold has no handler for this event type."""


# Matched in order of frequency (a class pattern that misses costs about as much as the handler):
# tries and runs in ``evolve``, then DAGs and what is only recorded, then commands. Each level takes
# what the levels before it left, so mypy checks that every event has its handler.
_OfCommands: TypeAlias = (TaskKillRequested | TaskKilled | TaskCleared | TaskRemoved | ClearTask | MarkTask
                          | KillTask | RequestBackfill | CancelBackfill | CommandRejected | DagRunReopened
                          | BackfillPlanned | BackfillFinished)
_RecordedOnly: TypeAlias = PodStarted | DeadlineMissed | TaskDeadlineMissed | CallbackCalled | SecretAccessed
"""Events the scheduler keeps in the log but does not act on (yet)."""
_OfPools: TypeAlias = (SetPool | DeletePool | PoolSlotsRequested | PoolSlotsGranted | PoolSlotsReleased
                       | TaskPoolRequested | TaskPoolGranted | TaskPoolReleased)
_OfAssets: TypeAlias = (AssetEventRecorded | TaskAssetEventsRecorded | AssetEventQueued | AssetEventForwarded
                        | AssetConsumerRegistered | AssetConsumerDropped | DagAssetsRegistered | AssetReaderRegistered
                        | AssetReaderDropped | AssetReaderCaughtUp | InletEventDelivered)
_OfExternal: TypeAlias = (ExternalWaitRequested | TaskDeferred | ExternalTaskReported | ExternalWaitAccepted
                          | ExternalWaitAnswered | ExternalWaitCancelled | TimeSensorMet | ExternalClearsSent)
_Rarer: TypeAlias = (DagParsed | DagTombstone | PauseDag | TriggerDagRun | DagQuarantined | DagQuarantineLifted
                     | DagRunTimedOut | TaskRescheduled | SensorTimedOut | _RecordedOnly | _OfPools | _OfAssets
                     | _OfExternal | _OfCommands)


def evolve(state: SchedulerState, event: SchedulerEvent) -> SchedulerState:
    """Apply one event (or DAG tombstone) to the state. A handler that raises quarantines the event's DAG."""
    try:
        match event:
            case TaskHeartbeat():
                _heartbeat(state, event)
            case TaskStarted():
                _started(state, event)
            case TaskLaunched():
                _launched(state, event)
            case TaskQueued():
                _queued(state, event)
            case TaskSucceeded() | TaskFailed() | TaskDeclaredDead() | TaskTrySkipped() | TaskPoked():
                _ended(state, event)
            case DagRunCreated():
                _run_created(state, event)
            case DagRunFinished():
                _run_finished(state, event)
            case TaskRetryScheduled():
                _retry_scheduled(state, event)
            case TaskUpstreamFailed():
                _upstream_failed(state, event)
            case TaskSkipped():
                commands.skipped(state, event)
            case TaskEmptySucceeded():
                _empty_succeeded(state, event)
            case TaskMapExpanded():
                mapping.expanded(state, event)
            case TaskMapFailed():
                mapping.map_failed(state, event)
            case TaskAdopted():
                _adopted(state, event)
            case PodFinished():
                _pod_finished(state, event)
            case _:
                _fold_rarer(state, event)
    except UnknownEvent:
        raise
    except Exception as error:  # noqa: BLE001 - deterministic: a replay folds the same event to the same quarantine
        if isinstance(event, SetPool | DeletePool | AssetEventRecorded | AssetEventForwarded):
            raise  # of no DAG: nothing to quarantine (a pool's size, an asset's ledger fold without fail)
        quarantine.hold(state, event.dag_id, error, event)
    return state


def fold(state: SchedulerState, events: Iterable[SchedulerEvent]) -> SchedulerState:
    for event in events:
        evolve(state, event)
    return state


def _fold_rarer(state: SchedulerState, event: _Rarer) -> None:
    match event:
        case DagParsed():
            _dag_parsed(state, event)
        case DagTombstone():
            _dag_deleted(state, event)
        case PauseDag():
            _pause(state, event)
        case TriggerDagRun():
            commands.trigger(state, event)
        case DagQuarantined():
            quarantine.quarantined(state, event)
        case DagQuarantineLifted():
            quarantine.lifted(state, event)
        case DagRunTimedOut():
            timeouts.timed_out(state, event)
        case TaskRescheduled():
            sensors.rescheduled(state, event)
        case SensorTimedOut():
            sensors.timed_out(state, event)
        case PodStarted() | DeadlineMissed() | TaskDeadlineMissed() | CallbackCalled() | SecretAccessed():
            pass  # recorded only
        case SetPool() | DeletePool() | PoolSlotsRequested() | PoolSlotsGranted() | PoolSlotsReleased() \
                | TaskPoolRequested() | TaskPoolGranted() | TaskPoolReleased():
            _fold_pool(state, event)
        case AssetEventRecorded() | TaskAssetEventsRecorded() | AssetEventQueued() | AssetEventForwarded() \
                | AssetConsumerRegistered() | AssetConsumerDropped() | DagAssetsRegistered() | AssetReaderRegistered() \
                | AssetReaderDropped() | AssetReaderCaughtUp() | InletEventDelivered():
            assets.fold(state, event)
        case ExternalWaitRequested() | TaskDeferred() | ExternalTaskReported() | ExternalWaitAccepted() \
                | ExternalWaitAnswered() | ExternalWaitCancelled() | TimeSensorMet() | ExternalClearsSent():
            _fold_external(state, event)
        case _:
            _fold_command(state, event)


def _fold_external(state: SchedulerState, event: _OfExternal) -> None:
    """A sensor's wait on another DAG (external.py) or on a moment (time_sensors.py)."""
    match event:
        case ExternalWaitRequested():
            external.requested(state, event)
        case TaskDeferred():
            external.deferred(state, event)
        case ExternalTaskReported():
            external.reported(state, event)
        case ExternalWaitAccepted():
            external.accepted(state, event)
        case ExternalWaitAnswered() | ExternalWaitCancelled():
            external.forgotten(state, event)
        case TimeSensorMet():
            time_sensors.met(state, event)
        case ExternalClearsSent():
            markers.sent(state, event)


def _fold_pool(state: SchedulerState, event: _OfPools) -> None:
    """A pool's ledger, if its partition is this one; the grants our tries hold (pools.py)."""
    match event:
        case SetPool():
            pools.set_pool(state.pools, event)
        case DeletePool():
            pools.delete_pool(state.pools, event)
        case PoolSlotsRequested():
            pools.slots_requested(state.pools, event)
        case PoolSlotsGranted():
            pools.slots_granted(state.pools, event)
        case PoolSlotsReleased():
            pools.slots_released(state.pools, event)
        case TaskPoolRequested():
            pools.task_requested(state, event)
        case TaskPoolGranted():
            pools.task_granted(state, event)
        case TaskPoolReleased():
            pools.task_released(state, event)


def _fold_command(state: SchedulerState, event: _OfCommands) -> None:
    """Operators' commands, and the owner's decisions that carry them out (commands.py)."""
    match event:
        case TaskKillRequested():
            commands.kill_requested(state, event)
        case TaskKilled():
            commands.killed(state, event)
        case TaskCleared():
            commands.cleared(state, event)
        case TaskRemoved():
            commands.removed(state, event)
        case ClearTask():
            commands.clear(state, event)
        case MarkTask():
            commands.mark(state, event)
        case KillTask():
            commands.kill(state, event)
        case RequestBackfill():
            commands.request_backfill(state, event)
        case CancelBackfill():
            commands.cancel_backfill(state, event)
        case CommandRejected():
            commands.rejected(state, event)
        case DagRunReopened():
            commands.reopened(state, event)
        case BackfillPlanned():
            commands.backfill_planned(state, event)
        case BackfillFinished():
            commands.backfill_finished(state, event)
        case _:
            _unknown(event)


def _unknown(event: Never) -> NoReturn:
    """Reached only by a value outside SchedulerEvent (mypy checks every member is handled above)."""
    raise UnknownEvent(f"the scheduler cannot fold {type(event).__name__}")


# -- DAGs and commands -------------------------------------------------------------------------

def _dag_parsed(state: SchedulerState, event: DagParsed) -> None:
    quarantine.lift_on_parse(state, event)
    known = state.dags.get(event.dag_id) or state.removed_dags.pop(event.dag_id, None)
    state.dags[event.dag_id] = DagEntry.of(event.definition, event.fingerprint,
                                           known.first_seen_at if known else event.at)
    _update_next_due(state, event.dag_id)
    time_runs_of(state, event.dag_id)


def _dag_deleted(state: SchedulerState, event: DagTombstone) -> None:
    entry = state.dags.pop(event.dag_id, None)
    if entry is not None:
        state.removed_dags[event.dag_id] = entry  # its open runs end, naming what is removed
    state.next_due.pop(event.dag_id, None)
    quarantine.lift_on_delete(state, event.dag_id)


def _update_next_due(state: SchedulerState, dag_id: str) -> None:
    dag = state.dags.get(dag_id)
    if dag is not None:
        state.next_due[dag_id] = first_due(dag, state.latest_scheduled.get(dag_id))


def _pause(state: SchedulerState, event: PauseDag) -> None:
    (state.paused.add if event.paused else state.paused.discard)(event.dag_id)


# -- runs ------------------------------------------------------------------------------------

def _run_created(state: SchedulerState, event: DagRunCreated) -> None:
    key = (event.dag_id, event.run_id)
    state.triggers.pop(key, None)
    if state.forgotten and retention.was_forgotten(state, event.dag_id, event.run_id):
        return  # it existed, finished and was forgotten (retention.py): it never runs again
    if event.run_type == "scheduled":
        latest = state.latest_scheduled.get(event.dag_id, event.logical_date)
        state.latest_scheduled[event.dag_id] = max(latest, event.logical_date)
        _update_next_due(state, event.dag_id)
    elif event.run_type == "backfill":
        commands.backfill_run_created(state, event.dag_id, key, event.logical_date)
    assets.run_created(state.assets, event)  # the events it consumes leave the queue
    if key not in state.runs and key not in state.finished:
        run = state.runs[key] = DagRun(event.dag_id, event.run_id, event.logical_date, event.run_type,
                                       event.conf_json, event.at, asset_events_json=event.asset_events_json)
        time_run(state, run)


def _run_finished(state: SchedulerState, event: DagRunFinished) -> None:
    key = (event.dag_id, event.run_id)
    run = state.runs.pop(key, None)
    if run is None:
        return
    waiting = next((instance for instance in run.tasks.values() if instance.pending), None)
    if waiting is not None:
        # A command was folded between the decision to finish and that decision's place in the log
        # (replay after a crash: the live owner had not decided on the command yet). The run stays
        # open, reopened by that command, so the command is carried out instead of lost.
        run.reopened_by = waiting.pending_request
        state.runs[key] = run
        return
    for task_id in run.tasks:
        forget_try(state, (event.dag_id, event.run_id, task_id))
    run.finished_state = event.state
    state.finished[key] = run  # kept: a clear or mark may reopen it, a repeated trigger must not recreate it
    retention.run_finished(state, event.dag_id)  # ... among the DAG's newest finished runs only


# -- tries -----------------------------------------------------------------------------------

def _queued(state: SchedulerState, event: TaskQueued) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    instance = run.instance(event.task_id, event.map_index)
    if instance.state not in (NONE, UP_FOR_RETRY) or event.try_number <= instance.try_number:
        return
    key = (event.dag_id, event.run_id, instance.key)
    state.waiting.pop(key, None)
    queued = run.tasks[instance.key] = TaskInstance(event.task_id, QUEUED, event.try_number, event.executor,
                                                    event.queue, event.scheduler_id, queued_at=event.at,
                                                    map_index=event.map_index)
    sensors.carried(instance, queued)
    state.unlaunched[key] = None


def _launched(state: SchedulerState, event: TaskLaunched) -> None:
    instance, key = _current(state, event)
    if instance is not None and instance.launched_at is None:  # the first launch is recorded once
        instance.launched_at = event.at
        instance.handle = instance.handle or event.handle  # the claimant's own handle, read first, stays
        now_live(state, key, instance)


def _started(state: SchedulerState, event: TaskStarted) -> None:
    # The first TaskStarted of a try in log order is its claim: that runner runs the user code,
    # any later one (a second launch, on any host) stood down. event.executor / event.queue
    # are what the worker says: informational, never stored.
    instance, key = _current(state, event)
    if instance is not None and not instance.runner_id:
        instance.state, instance.started_at, instance.runner_id = RUNNING, event.at, event.runner_id
        # The claimant's own handle (its launch's) names the process doing the work, even when no TaskLaunched
        # was committed (its scheduler died after the launch) or another launch's was: a successor probes and
        # adopts that one. A runner older than TaskStarted v3 states none: the launch's stays.
        instance.handle = event.handle or instance.handle
        now_live(state, key, instance)


def _heartbeat(state: SchedulerState, event: TaskHeartbeat) -> None:
    instance, key = _current(state, event)
    if instance is not None and _from_claimant(instance, event) and (instance.last_heartbeat_at or 0.0) < event.at:
        first_sign = instance.started_at is None and instance.last_heartbeat_at is None
        instance.last_heartbeat_at = event.at
        if first_sign and key in state.live:  # read before its TaskStarted: the heartbeat timeout applies now
            state.timers.watch(key, instance.try_number)


def _adopted(state: SchedulerState, event: TaskAdopted) -> None:
    instance, _key = _current(state, event)
    if instance is not None:
        instance.owner, instance.adopted_at = event.by_scheduler, event.at
        instance.handle = event.handle or instance.handle


def _ended(state: SchedulerState, event: TryEnded) -> None:
    instance, key = _current(state, event)
    if instance is not None and _from_claimant(instance, event):
        if isinstance(event, TaskPoked):
            sensors.poked(state, state.runs[key[:2]], instance, event)
            return
        outcome = FAILED
        if isinstance(event, TaskSucceeded | TaskTrySkipped):
            outcome = SUCCESS if isinstance(event, TaskSucceeded) else SKIPPED
            instance.values_json = event.values_json  # what its downstream tries are given (context.py)
        if isinstance(event, TaskSucceeded) and event.follow is not None:
            instance.follow_json = json.dumps(event.follow)  # what a branch chose (trigger_rules.py)
        if isinstance(event, TaskSucceeded):
            assets.succeeded(state.assets, event, _task_of(state, event.dag_id, event.task_id))
        end_try(state, state.runs[key[:2]], instance, outcome, event.at)
        if isinstance(event, TaskFailed) and not event.retryable:  # AirflowFailException: no retry
            instance.retryable = False


def _empty_succeeded(state: SchedulerState, event: TaskEmptySucceeded) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    instance = run.instance(event.task_id, event.map_index) if run is not None else None
    if instance is not None and instance.state == NONE:
        instance.state, instance.ended_at = SUCCESS, event.at
        assets.empty_succeeded(state.assets, event, _task_of(state, event.dag_id, event.task_id))


def _task_of(state: SchedulerState, dag_id: str, task_id: str) -> TaskDefinition | None:
    dag = state.dags.get(dag_id)
    return None if dag is None else dag.tasks.get(task_id)


def _pod_finished(state: SchedulerState, event: PodFinished) -> None:
    # An outcome the runner reported is in the log before its process (and so its pod) ended:
    # a try still active here ended without one, and decide fails it (pods.py).
    instance, _key = _current(state, event)
    if instance is not None:
        instance.pod_ended = pod_failure(event)


def _retry_scheduled(state: SchedulerState, event: TaskRetryScheduled) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    key = (event.dag_id, event.run_id, instance_key(event.task_id, event.map_index))
    instance = run.tasks.get(key[2]) if run else None
    if instance is None or instance.state != FAILED or instance.try_number != event.try_number:
        return
    instance.state, instance.not_before = UP_FOR_RETRY, event.not_before
    sensors.wait_reset(instance)
    state.waiting[key] = None
    state.timers.retry(key, instance.try_number, event.not_before)


def _upstream_failed(state: SchedulerState, event: TaskUpstreamFailed) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    instance = run.instance(event.task_id, event.map_index) if run is not None else None
    if instance is not None and instance.state == NONE:
        instance.state = UPSTREAM_FAILED


# -- helpers ---------------------------------------------------------------------------------

def _current(state: SchedulerState, event: TryEvent) -> tuple[TaskInstance | None, TryKey]:
    """The instance if ``event`` concerns its current, still active try; else None."""
    key = (event.dag_id, event.run_id, instance_key(event.task_id, event.map_index))
    instance = state.instance(key)
    if instance is None or instance.try_number != event.try_number or instance.state not in ACTIVE:
        return None, key
    return instance, key


def _from_claimant(instance: TaskInstance, event: TaskHeartbeat | TryEnded) -> bool:
    """Whether a runner's event comes from the try's claimant (or the claimant is not known yet:
    heartbeats travel on their own topic and may be read before the TaskStarted). An event no
    runner wrote (TaskDeclaredDead: the owner's verdict) always counts."""
    if not isinstance(event, RunnerEvent):
        return True
    return not instance.runner_id or event.runner_id == instance.runner_id
