"""Read model ``task_instance``: each task instance's current try and its state.

Lifecycle events come from ``tock.events`` (ordered per DAG). Only ``TaskQueued`` starts a
try; any other event of a try that is not the current one is history only (it is in
``task_event``) and changes nothing here. Heartbeats come from another topic in no fixed
order relative to the lifecycle, so they fold into their own columns (highest try, then
latest time), which is the same whatever the interleaving.

Operator commands: ``MarkTask`` sets the state at once (``marked_at`` / ``marked_by``) and
a marked row keeps it: later outcome events of that try (the runner's late success, its
``TaskKilled``) fill in who ran it but never the state. ``TaskCleared`` sets the state
``cleared`` (the row still describes the last try) and nothing of that try changes it
afterwards. The next ``TaskQueued`` starts afresh. ``KillTask`` of a queued or running try
(``kill_request_id``, once per request id, as the scheduler dedupes it) makes that try end as
``killed`` whatever outcome its runner reports (its user code may have finished before the kill
reached it), as the scheduler decides it. ``TaskKillRequested`` notes ``kill_requested_at``; a try
no runner had claimed (no ``TaskStarted`` yet) ends as ``killed`` at once. Nothing of a killed try
changes its state afterwards (a runner that lost the race to the kill may still append its
``TaskStarted``).

Control flow: ``TaskSkipped`` / ``TaskUpstreamFailed`` keep why the task will not run (``reason``,
``trigger_rule``, ``upstream_states_json``, and a skip's ``chosen_by``); a ``TaskSucceeded`` keeps what a
branch or short circuit followed (``follow_json``, None for a task that does not choose); a clear or the next
``TaskQueued`` forgets them.
"""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json
from schemas import (
    ExternalTaskReported,
    KillTask,
    MarkTask,
    PodFinished,
    SensorTimedOut,
    TaskAdopted,
    TaskCleared,
    TaskDeclaredDead,
    TaskDeferred,
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

TABLE = "task_instance"
MARKABLE = ("success", "failed", "skipped")
_TRY_EVENTS = (TaskLaunched, TaskStarted, TaskAdopted, TaskSucceeded, TaskFailed, TaskTrySkipped, TaskRetryScheduled,
               TaskDeclaredDead, PodFinished, TaskKillRequested, TaskKilled, TaskPoked, TaskRescheduled, SensorTimedOut,
               ExternalTaskReported)
_ENDED = (TaskUpstreamFailed, TaskSkipped, TaskRemoved, TaskEmptySucceeded, TaskMapFailed, TimeSensorMet)
_OUTCOMES = (TaskSucceeded, TaskFailed, TaskTrySkipped, TaskDeclaredDead, TaskKilled, TaskPoked)
_TRY_UNDER_WAY = frozenset({"queued", "running", "deferred"})  # the states an outcome of the current try may end
_POOL_WAIT = (TaskPoolRequested, TaskPoolGranted)  # a try waiting for its pool's slots: Airflow's "scheduled"
_WAITING = frozenset({None, "up_for_retry", "up_for_reschedule", "cleared", "scheduled"})  # a next try may come
_EVENTS = (TaskQueued, TaskDeferred, TaskHeartbeat, MarkTask, TaskCleared, KillTask, TaskMapExpanded, *_ENDED,
           *_TRY_EVENTS, *_POOL_WAIT)
# What a try event may still change on a marked row: who ran the try, never its outcome.
_ABOUT_THE_RUNNER = frozenset({"executor", "handle", "scheduler_id", "hostname", "pid", "runner_id", "start_date",
                               "kill_requested_at"})


def empty(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Row:
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index, "map_count": None,
            "state": None, "try_number": None,
            "executor": None, "queue": None, "handle": None, "hostname": None, "pid": None,
            "runner_id": None, "scheduler_id": None, "queued_at": None, "start_date": None,
            "end_date": None, "retry_not_before": None, "error": None, "reason": None, "updated_at": None,
            "heartbeat_try": None, "last_heartbeat": None, "marked_at": None, "marked_by": None,
            "cleared_at": None, "kill_requested_at": None, "kill_request_id": None, "kill_try": None,
            "values_json": None, "rendered_json": None, **_NO_DECISION}


# Why the instance did not run (the rule, the upstream states it read, the branch that chose) and what
# a branch's success followed: set by the decision's event, reset when the instance is tried again.
_NO_DECISION = {"trigger_rule": None, "upstream_states_json": None, "chosen_by": None, "follow_json": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.dag_id, event.run_id, event.task_id, _map_index(event)) if isinstance(event, _EVENTS) else None


def _map_index(event: object) -> int:
    """The map index an event names (a mapped task's instance); -1 for the rest and for events of a
    task as a whole (a removal, an expansion)."""
    index = getattr(event, "map_index", -1)
    return index if isinstance(index, int) else -1


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = row or empty(event.dag_id, event.run_id, event.task_id, _map_index(event))
    match event:
        case TaskMapExpanded():  # the mapped task as a whole: how many instances it has (their rows are theirs)
            return {**row, "map_count": event.count, "updated_at": event.at}
        case TaskDeferred() if row["try_number"] == event.try_number:  # after its try's success: its wait
            return {**row, "state": "deferred", "retry_not_before": event.until,
                    "reason": f"waiting for its run of DAG {event.external_dag_id}", "updated_at": event.at}
        case TaskQueued() | TaskDeferred():
            return _queued(row, event)
        case TaskHeartbeat():
            return _heartbeat(row, event)
        case MarkTask():
            return _marked(row, event)
        case TaskCleared():
            return _cleared(row, event)
        case KillTask():
            return _kill_asked(row, event)
        case TaskSkipped() | TaskUpstreamFailed():
            return _decided(row, event)
        case TaskPoolRequested() | TaskPoolGranted():
            return _pool_wait(row, event)
        case _ if isinstance(event, _ENDED):
            return {**row, "state": _ENDED_STATE[type(event)], "end_date": event.at,
                    "reason": getattr(event, "reason", None) or row["reason"], "updated_at": event.at}
        case _ if isinstance(event, _TRY_EVENTS):
            return _of_current_try(row, event) if _is_current(row, event.try_number) else row
    raise TypeError(f"task_instance read model cannot apply {type(event).__name__}")


_ENDED_STATE = {TaskUpstreamFailed: "upstream_failed", TaskSkipped: "skipped", TaskRemoved: "removed",
                TaskEmptySucceeded: "success", TaskMapFailed: "failed", TimeSensorMet: "success"}


def _decided(row: Row, event: TaskSkipped | TaskUpstreamFailed) -> Row:
    """The owner decided the instance will not run: the state, and the rule, states and choice behind it."""
    chosen_by = event.chosen_by if isinstance(event, TaskSkipped) else ""
    return {**row, "state": _ENDED_STATE[type(event)], "end_date": event.at, "reason": event.reason or row["reason"],
            "trigger_rule": event.trigger_rule or None, "chosen_by": chosen_by or None,
            "upstream_states_json": as_json(event.upstream_states) if event.upstream_states else None,
            "updated_at": event.at}


def _pool_wait(row: Row, event: TaskPoolRequested | TaskPoolGranted) -> Row:
    """The next try waits for its pool (then is granted its slots, and is queued next)."""
    if row["state"] not in _WAITING or row["marked_at"] is not None:
        return row  # about a try that is not the next one any more
    what = "granted" if isinstance(event, TaskPoolGranted) else "waiting for"
    return {**row, "state": "scheduled", "reason": f"{what} {event.slots} slot(s) of pool {event.pool}",
            "updated_at": event.at}


def _queued(row: Row, event: TaskQueued | TaskDeferred) -> Row:
    """A new try: queued, or (an external task sensor) deferred until the awaited DAG's owner answers."""
    if row["try_number"] is not None and event.try_number < row["try_number"]:
        return row  # a stale decision about an older try
    queued = isinstance(event, TaskQueued)
    return {**row, "state": "queued" if queued else "deferred", "try_number": event.try_number,
            "executor": event.executor if queued else None, "queue": event.queue if queued else None,
            "scheduler_id": event.scheduler_id, "queued_at": event.at,
            "handle": None, "hostname": None, "pid": None, "runner_id": None,
            "start_date": None if queued else event.at, "end_date": None,
            "retry_not_before": None if queued else event.until, "error": None,
            "reason": None if queued else f"waiting on DAG {event.external_dag_id}", "updated_at": event.at,
            "marked_at": None, "marked_by": None, "cleared_at": None, "kill_requested_at": None,
            "values_json": None, "rendered_json": None, **_NO_DECISION}


def _heartbeat(row: Row, event: TaskHeartbeat) -> Row:
    latest = (row["heartbeat_try"], row["last_heartbeat"])
    if latest[0] is not None and latest >= (event.try_number, event.at):
        return row
    return {**row, "heartbeat_try": event.try_number, "last_heartbeat": event.at}


def _marked(row: Row, event: MarkTask) -> Row:
    if event.state not in MARKABLE:
        return row  # not a state one can mark; the scheduler rejects the command
    return {**row, "state": event.state, "end_date": event.at, "retry_not_before": None, "updated_at": event.at,
            "marked_at": event.at, "marked_by": event.requested_by, "cleared_at": None}


def _cleared(row: Row, event: TaskCleared) -> Row:
    if row["try_number"] is not None and event.try_number < row["try_number"]:
        return row  # about a try older than the one the row shows
    return {**row, "state": "cleared", "retry_not_before": None, "reason": None, "updated_at": event.at,
            "cleared_at": event.at, "marked_at": None, "marked_by": None, **_NO_DECISION}


def _kill_asked(row: Row, event: KillTask) -> Row:
    if event.request_id and event.request_id == row["kill_request_id"]:
        return row  # a repeated request: applied once
    if row["state"] not in ("queued", "running"):
        return row  # nothing to kill: the scheduler rejects it
    return {**row, "kill_request_id": event.request_id, "kill_try": row["try_number"], "updated_at": event.at}


def _is_current(row: Row, try_number: int) -> bool:
    # A cleared row waits for its next TaskQueued: nothing of the cleared try changes it.
    return try_number == row["try_number"] and row["cleared_at"] is None


def _from_another_runner(row: Row, event) -> bool:
    """A runner's event from one that lost the try's claim: the first TaskStarted of a try in log order
    names its runner, as the runners and the scheduler agree; a second launch's records change nothing."""
    runner_id = getattr(event, "runner_id", None)
    return runner_id is not None and row["runner_id"] is not None and runner_id != row["runner_id"]


def _of_current_try(row: Row, event) -> Row:
    if _from_another_runner(row, event):
        return row
    if isinstance(event, TaskKillRequested) and row["runner_id"] is None and row["state"] == "queued":
        # No runner has claimed the try: by the claim rule none ever will, so it is over now.
        return {**row, "state": "killed", "end_date": event.at, "kill_requested_at": event.at,
                "reason": event.reason, "updated_at": event.at}
    changes = _CURRENT_TRY[type(event)](event)
    if isinstance(event, _OUTCOMES) and row["kill_try"] == row["try_number"]:
        changes["state"] = "killed"  # an operator's kill ends the try as killed, whatever it reports
    if row["marked_at"] is not None or row["state"] == "killed" \
            or (isinstance(event, _OUTCOMES) and row["state"] not in _TRY_UNDER_WAY):
        # The marked state wins over the try's own outcome; a killed try's late events change nothing;
        # a try already over (declared dead, then maybe up for retry) keeps its first outcome, as the
        # scheduler's fold does: a frozen runner's late success is history, not the task's state.
        changes = {name: value for name, value in changes.items() if name in _ABOUT_THE_RUNNER}
    return {**row, **changes, "updated_at": event.at} if changes else row


_CURRENT_TRY = {
    # The executor and queue stay those TaskQueued wrote: the executor of a try is written once.
    TaskLaunched: lambda event: {"handle": event.handle, "scheduler_id": event.scheduler_id},
    TaskStarted: lambda event: {"state": "running", "hostname": event.hostname, "pid": event.pid,
                                "runner_id": event.runner_id, "start_date": event.at},
    TaskAdopted: lambda event: {"state": "running", "handle": event.handle,
                                "scheduler_id": event.by_scheduler},
    TaskSucceeded: lambda event: {"state": "success", "end_date": event.at, "values_json": event.values_json or None,
                                  "rendered_json": event.rendered_json or None,
                                  "follow_json": None if event.follow is None else as_json(event.follow)},
    TaskTrySkipped: lambda event: {"state": "skipped", "end_date": event.at, "reason": event.reason or None,
                                   "values_json": event.values_json or None,
                                   "rendered_json": event.rendered_json or None},
    TaskFailed: lambda event: {"state": "failed", "end_date": event.at, "error": event.error,
                               "rendered_json": event.rendered_json or None},
    TaskRetryScheduled: lambda event: {"state": "up_for_retry", "retry_not_before": event.not_before},
    # A sensor's poke not met (Airflow's state: up_for_reschedule); retry_not_before is its next poke.
    TaskPoked: lambda event: {"state": "up_for_reschedule", "end_date": event.at,
                              "rendered_json": event.rendered_json or None},
    TaskRescheduled: lambda event: {"state": "up_for_reschedule", "retry_not_before": event.not_before},
    SensorTimedOut: lambda event: {"state": event.state, "retry_not_before": None,
                                   "reason": f"the sensor timed out: it waited {event.waited:.0f} s, its timeout is "
                                             f"{event.timeout:g} s"},
    TaskDeclaredDead: lambda event: {"state": "dead", "end_date": event.at, "error": event.reason},
    ExternalTaskReported: lambda event: {"state": event.outcome, "end_date": event.at, "retry_not_before": None,
                                         "reason": event.reason, **({"error": event.reason}
                                                                    if event.outcome == "failed" else {})},
    PodFinished: lambda event: {},  # the outcome events that follow it change the state
    TaskKillRequested: lambda event: {"kill_requested_at": event.at, "reason": event.reason},
    TaskKilled: lambda event: {"state": "killed", "end_date": event.at,
                               **({"reason": event.reason} if event.reason else {})},
}
