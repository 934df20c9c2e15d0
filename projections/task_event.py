"""Read model ``task_event``: every event of every task instance, in log order (history).

Append-only: one row per record, keyed by its log position. Heartbeats are not history
(the heartbeats topic is compacted; only the latest matters and it is in task_instance).
Commands that name a task are history too (a run-wide ``ClearTask`` has task_id "");
a task instance's ``TaskDeadlineMissed`` (from the monitor) is history too, and so is each
``SecretAccessed`` of its tries (a variable or connection read: its name and backend, no value);
run-level events (runs, backfills, rejections) are not: they are in ``dag_run``,
``backfill`` and ``command``.
"""

from __future__ import annotations

from projections.records import Record, Row, logical_topic, payload_json
from schemas import (
    ClearTask,
    ExternalTaskReported,
    KillTask,
    MarkTask,
    PodFinished,
    PodStarted,
    SecretAccessed,
    SensorTimedOut,
    TaskAdopted,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskDeferred,
    TaskEmptySucceeded,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskMapExpanded,
    TaskMapFailed,
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

TABLE = "task_event"
_EVENTS = (TaskQueued, TaskLaunched, TaskStarted, TaskAdopted, TaskSucceeded, TaskFailed,
           TaskRetryScheduled, TaskDeclaredDead, TaskUpstreamFailed, PodStarted, PodFinished, ClearTask, MarkTask,
           KillTask, TaskCleared, TaskKillRequested, TaskKilled, TaskSkipped, TaskRemoved, TaskDeadlineMissed,
           SecretAccessed, TaskTrySkipped, TaskEmptySucceeded, TaskMapExpanded, TaskMapFailed, TaskPoked,
           TaskRescheduled, SensorTimedOut, TaskDeferred, ExternalTaskReported, TimeSensorMet)


def rows_for(record: Record) -> list[Row]:
    event = record.event
    if not isinstance(event, _EVENTS):
        return []
    return [{"topic": logical_topic(record.topic), "partition": record.partition, "offset": record.offset,
             "dag_id": event.dag_id, "run_id": event.run_id, "task_id": event.task_id,
             "map_index": getattr(event, "map_index", -1), "try_number": getattr(event, "try_number", None),
             "event_type": type(event).__name__,
             "at": event.at, "payload_json": payload_json(event)}]
