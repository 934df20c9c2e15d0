"""The monitor's state for one partition and ``evolve``: one small handler per event type.

What it remembers: each DAG's deadline (from tock.dags), each open run's start and
whether a DeadlineMissed of it is in the log, the per-task deadlines and each task
instance's first TaskQueued in its run (until the run ends), each try's TaskQueued (executor, queue,
time) until it starts and its TaskStarted until it ends, and the windowed statistics.
Finished runs without a miss are forgotten; runs that missed keep a mark, so a run
reopened later never misses twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Never, NoReturn, TypeAlias, TypeVar

from schemas import (
    CallbackCalled,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DagsTopicEvent,
    DeadlineMissed,
    EventsTopicEvent,
    ExternalTaskReported,
    SensorTimedOut,
    TaskAdopted,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskEmptySucceeded,
    TaskFailed,
    TaskKilled,
    TaskLaunched,
    TaskPoked,
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
from services.monitor.core import task_callbacks as callbacks
from services.monitor.core.notify import DEADLINE_MISSED, DagCallbacks, NotificationBook
from services.monitor.core.windows import WindowedStats

RunKey = tuple[str, str]  # (dag_id, run_id)
# A run that ended past its deadline unseen (every monitor down or frozen) still gets its miss,
# late, if its deadline passed at most this long ago; older ones (a monitor deployed on an old
# log) are left alone rather than flooding the log with history.
LATE_MISS_HORIZON = 3600.0
TryKey = tuple[str, str, str, int]  # (dag_id, run_id, task_id, try_number)
TaskKey = tuple[str, str, str]  # (dag_id, run_id, task_id): a task instance
AFTER_LOGICAL_DATE = "logical_date"  # a DagDefinition.deadline_from

# Measures of the windowed statistics, and what each value is.
RUN_DURATION = "run_duration"  # seconds, key (dag_id,)
RUN_FAILED = "run_failed"  # 1 failed / 0 succeeded: mean = run failure rate, key (dag_id,)
TASK_DURATION = "task_duration"  # seconds from TaskStarted to its outcome, key (dag_id, task_id)
TASK_FAILED = "task_failed"  # 1 failed / 0 succeeded: mean = task failure rate, key (dag_id,)
TASK_RETRIES = "task_retries"  # 1 per retry scheduled: count = retries, key (dag_id,)
QUEUE_LATENCY = "queue_latency"  # seconds from TaskQueued to TaskStarted, key (executor, queue)
ADOPTIONS = "adoptions"  # 1 per TaskAdopted, key (dag_id,)
DEADLINE_MISSES = "deadline_misses"  # 1 per run that missed its deadline, key (dag_id,)
TASK_DEADLINE_MISSES = "task_deadline_misses"  # 1 per task instance that missed its deadline, key (dag_id, task_id)


class UnknownEvent(TypeError):
    """An event the monitor does not know how to fold (not of tock.events, nor a DAG definition)."""


@dataclass(frozen=True)
class DagDefinitionRemoved:
    """A DAG's definition was deleted from tock.dags (a tombstone). Not an event: a tombstone."""

    dag_id: str


MonitorEvent: TypeAlias = EventsTopicEvent | DagsTopicEvent | DagDefinitionRemoved
"""What the monitor folds: tock.events and tock.dags (a deleted DAG's tombstone included)."""

TryEvent: TypeAlias = (TaskQueued | TaskStarted | TaskSucceeded | TaskFailed | TaskTrySkipped | TaskDeclaredDead
                       | TaskPoked)
"""Events of one try that the monitor times (queue latency, duration)."""

InstanceEnded: TypeAlias = (TaskSucceeded | TaskFailed | TaskTrySkipped | TaskKilled | TaskSkipped | TaskUpstreamFailed
                                | TaskRemoved | TaskEmptySucceeded | SensorTimedOut | ExternalTaskReported
                                | TimeSensorMet)
"""A task instance has ended (for its deadline; a failure with a retry to come is undone by TaskRetryScheduled)."""

InstanceEvent: TypeAlias = InstanceEnded | TaskQueued | TaskRetryScheduled | TaskCleared
"""Events of a task instance that move its deadline clock."""

K = TypeVar("K", bound=tuple[object, ...])
V = TypeVar("V")


@dataclass
class RunClock:
    """An open run: when it started (created, or reopened), its logical date if it is a scheduled
    run not reopened (what a DAG's deadline may count from instead), and whether its miss is in
    the log."""

    started_at: float
    missed: bool = False
    logical_date: float | None = None


@dataclass
class TaskClock:
    """A task instance of an open run: its first TaskQueued (in the run, or since it was last
    cleared), whether it has ended (a failure with a retry to come has not), and whether its
    TaskDeadlineMissed is in the log."""

    queued_at: float
    ended: bool = False
    missed: bool = False


@dataclass
class MonitorState:
    """One partition's fold."""

    deadlines: dict[str, float] = field(default_factory=dict)  # dag_id -> seconds, DAGs that declare one
    after_logical_date: set[str] = field(default_factory=set)  # DAGs whose deadline counts from the logical date
    runs: dict[RunKey, RunClock] = field(default_factory=dict)  # open runs
    missed: set[RunKey] = field(default_factory=set)  # runs whose DeadlineMissed is in the log
    # Runs that ended after their deadline with no DeadlineMissed in the log (no monitor was
    # there in time): run -> its deadline. Owed a late miss within LATE_MISS_HORIZON.
    finished_late: dict[RunKey, float] = field(default_factory=dict)
    task_deadlines: dict[str, dict[str, float]] = field(default_factory=dict)  # dag_id -> task_id -> seconds
    tasks: dict[TaskKey, TaskClock] = field(default_factory=dict)  # task instances of open runs
    tasks_missed: set[TaskKey] = field(default_factory=set)  # whose TaskDeadlineMissed is in the log
    queued: dict[TryKey, tuple[float, str, str]] = field(default_factory=dict)  # at, executor, queue
    started: dict[TryKey, float] = field(default_factory=dict)
    stats: WindowedStats = field(default_factory=WindowedStats)
    notifications: NotificationBook = field(default_factory=NotificationBook)
    events_folded: int = 0


def run_deadline(state: MonitorState, dag_id: str, clock: RunClock) -> float | None:
    """When an open run must have finished, by its DAG's current definition (None: no deadline)."""
    seconds = state.deadlines.get(dag_id)
    if seconds is None:
        return None
    if dag_id in state.after_logical_date and clock.logical_date is not None:
        return clock.logical_date + seconds
    return clock.started_at + seconds


def evolve(state: MonitorState, event: MonitorEvent) -> MonitorState:
    """Fold one event into ``state`` (in place; returned for chaining). Events of tock.events the
    monitor does not measure change nothing; anything else raises UnknownEvent."""
    # Matched in order of frequency (a class pattern that misses costs about as much as a handler).
    match event:
        case TaskQueued():
            _task_queued(state, event)
        case TaskLaunched():
            pass  # not measured (the most frequent of those)
        case TaskStarted():
            _task_started(state, event)
        case TaskSucceeded() | TaskFailed() | TaskTrySkipped():
            _task_ended(state, event)
        case DagRunCreated():
            _run_created(state, event)
        case DagRunFinished():
            _run_finished(state, event)
        case _:
            _fold_rarer(state, event)
    state.events_folded += 1
    return state


def _fold_rarer(state: MonitorState, event: MonitorEvent) -> None:
    match event:
        case TaskRetryScheduled():
            _task_retry_coming(state, event)
        case TaskPoked():
            _task_poked(state, event)
        case TaskRescheduled():
            callbacks.rescheduled(state.notifications, event)
        case SensorTimedOut():
            _task_instance_ended(state, event)
            callbacks.sensor_timed_out(state.notifications, event)
        case TaskKilled() | TaskSkipped() | TaskUpstreamFailed() | TaskRemoved():
            _task_instance_ended(state, event)
        case ExternalTaskReported() | TimeSensorMet():
            _task_instance_ended(state, event)
            callbacks.deferral_ended(state.notifications, event)
        case TaskEmptySucceeded():
            _task_instance_ended(state, event)
            callbacks.empty_succeeded(state.notifications, event)
        case TaskCleared():
            _task_cleared(state, event)
        case TaskDeadlineMissed():
            _task_deadline_missed(state, event)
        case TaskDeclaredDead():
            _declared_dead(state, event)
        case TaskAdopted():
            _task_adopted(state, event)
        case DagParsed():
            _dag_parsed(state, event)
        case DagDefinitionRemoved():
            _dag_removed(state, event)
        case DagRunReopened():
            _run_reopened(state, event)
        case DeadlineMissed():
            _deadline_missed(state, event)
        case CallbackCalled():
            _callback_called(state, event)
        case _ if not isinstance(event, EventsTopicEvent):
            _unknown(event)


def _unknown(event: Never) -> NoReturn:
    """Reached only by a value outside MonitorEvent (mypy checks every member is handled above)."""
    raise UnknownEvent(f"the monitor cannot fold {type(event).__name__}")


def fold(events: Iterable[MonitorEvent], state: MonitorState | None = None) -> MonitorState:
    """``evolve`` over many events."""
    state = MonitorState() if state is None else state
    for event in events:
        evolve(state, event)
    return state


def _dag_parsed(state: MonitorState, event: DagParsed) -> None:
    definition = event.definition
    state.notifications.define(event.dag_id, callbacks.dag_callbacks(definition, event.at))
    if event.definition.deadline is None:
        state.deadlines.pop(event.dag_id, None)
    else:
        state.deadlines[event.dag_id] = event.definition.deadline
    if definition.deadline_from == AFTER_LOGICAL_DATE:
        state.after_logical_date.add(event.dag_id)
    else:
        state.after_logical_date.discard(event.dag_id)
    task_deadlines = {task.task_id: task.deadline for task in definition.tasks if task.deadline is not None}
    if task_deadlines:
        state.task_deadlines[event.dag_id] = task_deadlines
    else:
        state.task_deadlines.pop(event.dag_id, None)


def _dag_removed(state: MonitorState, event: DagDefinitionRemoved) -> None:
    state.deadlines.pop(event.dag_id, None)
    state.after_logical_date.discard(event.dag_id)
    state.task_deadlines.pop(event.dag_id, None)
    state.notifications.define(event.dag_id, DagCallbacks(0.0))


def _run_created(state: MonitorState, event: DagRunCreated) -> None:
    key = (event.dag_id, event.run_id)
    # Only a scheduled run's logical date is a time it is due by: a manual run's is when it was
    # asked for, a backfill's is in the past by design (it would miss at once).
    logical_date = event.logical_date if event.run_type == "scheduled" else None
    state.runs.setdefault(key, RunClock(event.at, missed=key in state.missed, logical_date=logical_date))
    callbacks.run_created(state.notifications, event)


def _run_reopened(state: MonitorState, event: DagRunReopened) -> None:
    # The run goes on again; its deadline counts from now (not its logical date, long past),
    # unless it has missed one already.
    key = (event.dag_id, event.run_id)
    if key not in state.runs:
        state.runs[key] = RunClock(event.at, missed=key in state.missed)


def _run_finished(state: MonitorState, event: DagRunFinished) -> None:
    key = (event.dag_id, event.run_id)
    clock = state.runs.pop(key, None)
    _forget_tries_of(state, event.dag_id, event.run_id)
    deadline = None if clock is None or clock.missed else run_deadline(state, event.dag_id, clock)
    if deadline is not None and event.at > deadline:
        state.finished_late[key] = deadline
    _forget_old_late_runs(state, event.at)
    if clock is not None:
        state.stats.observe(RUN_DURATION, (event.dag_id,), event.at, event.at - clock.started_at)
    state.stats.observe(RUN_FAILED, (event.dag_id,), event.at, 1.0 if event.state == "failed" else 0.0)
    callbacks.run_finished(state.notifications, event)


def _forget_old_late_runs(state: MonitorState, now: float) -> None:
    # Event time is the clock here: late runs past the horizon will never be owed a miss.
    for key in [key for key, deadline in state.finished_late.items() if deadline < now - LATE_MISS_HORIZON]:
        del state.finished_late[key]


def _forget_tries_of(state: MonitorState, dag_id: str, run_id: str) -> None:
    # Tries that never started or never ended (killed, removed, marked) end with their run.
    # Only open tries are scanned: few, next to the tries that come and go.
    _forget_keys_of(state.queued, dag_id, run_id)
    _forget_keys_of(state.started, dag_id, run_id)
    _forget_keys_of(state.tasks, dag_id, run_id)


def _forget_keys_of(book: dict[K, V], dag_id: str, run_id: str) -> None:
    """Drop the entries of one run from a book keyed by (dag_id, run_id, ...)."""
    for key in [key for key in book if key[1] == run_id and key[0] == dag_id]:
        del book[key]


def _deadline_missed(state: MonitorState, event: DeadlineMissed) -> None:
    key = (event.dag_id, event.run_id)
    if key in state.missed:
        return  # our own decision read back (or a duplicate): counted once
    state.missed.add(key)
    state.finished_late.pop(key, None)
    state.notifications.triggered(event.dag_id, event.run_id, DEADLINE_MISSED, event.at,
                                  {"deadline": event.deadline})
    clock = state.runs.get(key)
    if clock is not None:
        clock.missed = True
    state.stats.observe(DEADLINE_MISSES, (event.dag_id,), event.at, 1.0)


def _task_deadline_missed(state: MonitorState, event: TaskDeadlineMissed) -> None:
    key = (event.dag_id, event.run_id, event.task_id)
    if key in state.tasks_missed:
        return  # our own decision read back (or a duplicate): counted once
    state.tasks_missed.add(key)
    state.notifications.triggered(event.dag_id, event.run_id, DEADLINE_MISSED, event.at,
                                  {"deadline": event.deadline}, task_id=event.task_id)
    clock = state.tasks.get(key)
    if clock is not None:
        clock.missed = True
    state.stats.observe(TASK_DEADLINE_MISSES, (event.dag_id, event.task_id), event.at, 1.0)


def _callback_called(state: MonitorState, event: CallbackCalled) -> None:
    state.notifications.called((event.dag_id, event.run_id, event.trigger, event.task_id, event.try_number,
                                event.target))


def _try_key(event: TryEvent) -> TryKey:
    return (event.dag_id, event.run_id, event.task_id, event.try_number)


def _task_key(event: InstanceEvent) -> TaskKey:
    return (event.dag_id, event.run_id, event.task_id)


def _task_queued(state: MonitorState, event: TaskQueued) -> None:
    state.queued[_try_key(event)] = (event.at, event.executor, event.queue)
    callbacks.try_queued(state.notifications, event)
    key = _task_key(event)
    clock = state.tasks.get(key)
    if clock is None:
        state.tasks[key] = TaskClock(event.at, missed=key in state.tasks_missed)
    else:
        clock.ended = False  # a retry: the clock runs on from the first TaskQueued


def _task_instance_ended(state: MonitorState, event: InstanceEnded) -> None:
    clock = state.tasks.get(_task_key(event))
    if clock is not None:
        clock.ended = True


def _task_retry_coming(state: MonitorState, event: TaskRetryScheduled) -> None:
    clock = state.tasks.get(_task_key(event))
    if clock is not None:
        clock.ended = False  # failed, but not ended: it goes on with another try
    callbacks.retry_scheduled(state.notifications, event)
    state.stats.observe(TASK_RETRIES, (event.dag_id,), event.at, 1.0)


def _task_cleared(state: MonitorState, event: TaskCleared) -> None:
    # Cleared to run again: its next TaskQueued starts its clock afresh (a miss already written stays the only one).
    state.tasks.pop(_task_key(event), None)


def _task_started(state: MonitorState, event: TaskStarted) -> None:
    callbacks.try_started(state.notifications, event)
    key = _try_key(event)
    queued = state.queued.pop(key, None)
    if key in state.started:
        return  # a second runner's claim: the first one counts
    state.started[key] = event.at
    if queued is not None:
        queued_at, executor, queue = queued
        state.stats.observe(QUEUE_LATENCY, (executor, queue), event.at, event.at - queued_at)


def _task_ended(state: MonitorState, event: TaskSucceeded | TaskFailed | TaskTrySkipped) -> None:
    key = _try_key(event)
    state.queued.pop(key, None)
    started_at = state.started.pop(key, None)
    if started_at is not None:
        state.stats.observe(TASK_DURATION, (event.dag_id, event.task_id), event.at, event.at - started_at)
    state.stats.observe(TASK_FAILED, (event.dag_id,), event.at, 1.0 if isinstance(event, TaskFailed) else 0.0)
    _task_instance_ended(state, event)
    callbacks.try_ended(state.notifications, event)


def _task_poked(state: MonitorState, event: TaskPoked) -> None:
    """A sensor's poke was not met: its try is over (timed as any try), its task instance is not."""
    key = _try_key(event)
    state.queued.pop(key, None)
    started_at = state.started.pop(key, None)
    if started_at is not None:
        state.stats.observe(TASK_DURATION, (event.dag_id, event.task_id), event.at, event.at - started_at)


def _declared_dead(state: MonitorState, event: TaskDeclaredDead) -> None:
    # No outcome will come: forget the try (its death shows as the TaskFailed, if any, that follows).
    key = _try_key(event)
    state.queued.pop(key, None)
    state.started.pop(key, None)
    callbacks.declared_dead(state.notifications, event)


def _task_adopted(state: MonitorState, event: TaskAdopted) -> None:
    state.stats.observe(ADOPTIONS, (event.dag_id,), event.at, 1.0)
