"""Which runs an event concerns, as the shell asks it when choosing the runs to walk again.

The typed rule that replaces asking an event ``hasattr(event, "run_id")``: ``RunEvent`` is
every event of the closed ``schemas.Event`` union that names a run (a unit test checks it
against the union, so an event added with a ``run_id`` cannot be missed).
"""

from __future__ import annotations

from typing import TypeAlias, TypeGuard, get_args

from schemas import (
    CallbackCalled,
    ClearTask,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DagRunTimedOut,
    DeadlineMissed,
    Event,
    ExternalTaskReported,
    KillTask,
    MarkTask,
    PauseDag,
    PodFinished,
    PodStarted,
    PoolSlotsGranted,
    PoolSlotsReleased,
    PoolSlotsRequested,
    SecretAccessed,
    SensorTimedOut,
    TaskAdopted,
    TaskAssetEventsRecorded,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskDeferred,
    TaskEmptySucceeded,
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskLogShipped,
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
)
from services.scheduler.core import DagTombstone

RunEvent: TypeAlias = (
    CallbackCalled | ClearTask | DagRunCreated | DagRunFinished | DagRunReopened | DeadlineMissed | KillTask
    | MarkTask | PodFinished | PodStarted | TaskAdopted | TaskCleared | TaskDeadlineMissed | TaskDeclaredDead
    | TaskFailed | TaskHeartbeat | TaskKillRequested | TaskKilled | TaskLaunched | TaskLogShipped | TaskQueued
    | TaskRemoved | TaskRetryScheduled | TaskSkipped | TaskStarted | TaskSucceeded | TaskUpstreamFailed
    | TaskTrySkipped | TaskEmptySucceeded | DagRunTimedOut | TaskMapExpanded | TaskMapFailed
    | SecretAccessed | TaskPoked | TaskRescheduled | SensorTimedOut | TaskPoolRequested | TaskPoolGranted
    | TaskPoolReleased | PoolSlotsRequested | PoolSlotsGranted | PoolSlotsReleased | TaskAssetEventsRecorded
    | TaskDeferred | ExternalTaskReported | TimeSensorMet
)
EveryRunEvent: TypeAlias = DagParsed | DagTombstone | PauseDag  # may change what any run of the DAG does

Folded: TypeAlias = Event | DagTombstone  # what a partition's memory folds
RunKey: TypeAlias = tuple[str, str]  # (dag_id, run_id)


# Matched on the exact type (the union's members are final): a set lookup per folded record
# rather than an isinstance walk over the 27 members.
_RUN_EVENT_TYPES: frozenset[type] = frozenset(get_args(RunEvent))


def names_a_run(event: Folded) -> TypeGuard[RunEvent]:
    return type(event) in _RUN_EVENT_TYPES


def run_of(event: Folded) -> RunKey | None:
    """The run an event concerns, None if it names none."""
    if names_a_run(event):
        return event.dag_id, event.run_id
    return None


def concerns_every_run(event: Folded) -> bool:
    """Whether the event may change any run of its DAG (a definition, its removal, a pause, or a marker's
    clear, which names its run by logical date)."""
    return isinstance(event, EveryRunEvent) or (isinstance(event, ClearTask) and not event.run_id)
