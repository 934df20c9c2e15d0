"""Read model ``task_instance``: each task instance's current try and its state.

Lifecycle events come from ``tock.events`` (ordered per DAG). Only ``TaskQueued`` starts a
try; any other event of a try that is not the current one is history only (it is in
``task_event``) and changes nothing here. Heartbeats come from another topic in no fixed
order relative to the lifecycle, so they fold into their own columns (highest try, then
latest time), which is the same whatever the interleaving.
"""

from __future__ import annotations

from schemas import (PodFinished, TaskAdopted, TaskDeclaredDead, TaskFailed, TaskHeartbeat, TaskLaunched,
                     TaskQueued, TaskRetryScheduled, TaskStarted, TaskSucceeded, TaskUpstreamFailed)
from projections.records import Key, Record, Row

TABLE = "task_instance"
_TRY_EVENTS = (TaskLaunched, TaskStarted, TaskAdopted, TaskSucceeded, TaskFailed,
               TaskRetryScheduled, TaskDeclaredDead, PodFinished)
_EVENTS = (TaskQueued, TaskUpstreamFailed, TaskHeartbeat, *_TRY_EVENTS)


def empty(dag_id: str, run_id: str, task_id: str) -> Row:
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "state": None, "try_number": None,
            "executor": None, "queue": None, "handle": None, "hostname": None, "pid": None,
            "runner_id": None, "scheduler_id": None, "queued_at": None, "start_date": None,
            "end_date": None, "retry_not_before": None, "error": None, "updated_at": None,
            "heartbeat_try": None, "last_heartbeat": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.dag_id, event.run_id, event.task_id) if isinstance(event, _EVENTS) else None


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = row or empty(event.dag_id, event.run_id, event.task_id)
    match event:
        case TaskQueued():
            return _queued(row, event)
        case TaskUpstreamFailed():
            return {**row, "state": "upstream_failed", "end_date": event.at, "updated_at": event.at}
        case TaskHeartbeat():
            return _heartbeat(row, event)
        case _ if isinstance(event, _TRY_EVENTS):
            return _of_current_try(row, event) if event.try_number == row["try_number"] else row
    raise TypeError(f"task_instance read model cannot apply {type(event).__name__}")


def _queued(row: Row, event: TaskQueued) -> Row:
    if row["try_number"] is not None and event.try_number < row["try_number"]:
        return row  # a stale decision about an older try
    return {**row, "state": "queued", "try_number": event.try_number, "executor": event.executor,
            "queue": event.queue, "scheduler_id": event.scheduler_id, "queued_at": event.at,
            "handle": None, "hostname": None, "pid": None, "runner_id": None, "start_date": None,
            "end_date": None, "retry_not_before": None, "error": None, "updated_at": event.at}


def _heartbeat(row: Row, event: TaskHeartbeat) -> Row:
    latest = (row["heartbeat_try"], row["last_heartbeat"])
    if latest[0] is not None and latest >= (event.try_number, event.at):
        return row
    return {**row, "heartbeat_try": event.try_number, "last_heartbeat": event.at}


def _of_current_try(row: Row, event) -> Row:
    changes = _CURRENT_TRY[type(event)](event)
    return {**row, **changes, "updated_at": event.at} if changes else row


_CURRENT_TRY = {
    TaskLaunched: lambda event: {"executor": event.executor, "handle": event.handle,
                                 "scheduler_id": event.scheduler_id},
    TaskStarted: lambda event: {"state": "running", "hostname": event.hostname, "pid": event.pid,
                                "runner_id": event.runner_id, "start_date": event.at},
    TaskAdopted: lambda event: {"state": "running", "handle": event.handle,
                                "scheduler_id": event.by_scheduler},
    TaskSucceeded: lambda event: {"state": "success", "end_date": event.at},
    TaskFailed: lambda event: {"state": "failed", "end_date": event.at, "error": event.error},
    TaskRetryScheduled: lambda event: {"state": "up_for_retry", "retry_not_before": event.not_before},
    TaskDeclaredDead: lambda event: {"state": "dead", "end_date": event.at, "error": event.reason},
    PodFinished: lambda event: {},  # the outcome events that follow it change the state
}
