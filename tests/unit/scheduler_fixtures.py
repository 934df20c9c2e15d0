"""Builders of DAG definitions and events for the scheduler core's unit tests."""

from __future__ import annotations

from infra.log import LogRecord
from schemas import (
    EVENTS,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    TaskDefinition,
    TaskFailed,
    TaskHeartbeat,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from services.scheduler.core import Policy, SchedulerState, fold

ME = "sched-a"
POLICY = Policy(scheduler_id=ME, heartbeat_timeout=30.0)
RUN = "manual__r1"


def parsed(dag_id: str = "etl", edges: dict[str, list[str]] | None = None, *, retries: int = 0,
           retry_delay: float = 10.0, schedule: str | None = None, start_date: float | None = None,
           catchup: bool = False, max_active_runs: int = 16, at: float = 0.0) -> DagParsed:
    """A DagParsed whose tasks are the keys of ``edges`` (task -> its upstream)."""
    edges = {"a": []} if edges is None else edges
    tasks = [TaskDefinition(task_id=task_id, kind="bash", command="true", upstream=ups, retries=retries,
                            retry_delay=retry_delay) for task_id, ups in edges.items()]
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", schedule=schedule,
                               start_date=start_date, catchup=catchup, max_active_runs=max_active_runs,
                               tasks=tasks)
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}-{len(tasks)}",
                     definition=definition, at=at)


def created(dag_id: str = "etl", run_id: str = RUN, at: float = 1.0) -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual",
                         dag_fingerprint="fp", scheduler_id=ME, at=at)


def queued(task_id: str, try_number: int = 1, at: float = 2.0, run_id: str = RUN, owner: str = ME,
           executor: str = "local", queue: str = "default") -> TaskQueued:
    return TaskQueued(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number, executor=executor,
                      queue=queue, scheduler_id=owner, at=at)


def launched(task_id: str, try_number: int = 1, at: float = 3.0, handle: str = "10@h:5",
             owner: str = ME) -> TaskLaunched:
    return TaskLaunched(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, executor="local",
                        handle=handle, scheduler_id=owner, at=at)


def started(task_id: str, try_number: int = 1, at: float = 4.0, executor: str = "", queue: str = "",
            runner_id: str = "r", handle: str = "") -> TaskStarted:
    return TaskStarted(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname="h", pid=10, executor=executor, queue=queue, handle=handle, at=at)


def heartbeat(task_id: str, try_number: int = 1, at: float = 5.0, runner_id: str = "r") -> TaskHeartbeat:
    return TaskHeartbeat(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id=runner_id,
                         at=at)


def succeeded(task_id: str, try_number: int = 1, at: float = 6.0, runner_id: str = "r",
              values_json: str = "", run_id: str = RUN) -> TaskSucceeded:
    return TaskSucceeded(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number, runner_id=runner_id,
                         values_json=values_json, at=at)


def failed(task_id: str, try_number: int = 1, at: float = 6.0) -> TaskFailed:
    return TaskFailed(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id="r",
                      error="boom", at=at)


def ran(task_id: str, try_number: int = 1) -> list:
    """A try that was queued, launched, started and succeeded."""
    return [queued(task_id, try_number), launched(task_id, try_number), started(task_id, try_number),
            succeeded(task_id, try_number)]


def state_of(*events) -> SchedulerState:
    return fold(SchedulerState(), events)


def names(events: list) -> list[str]:
    return [type(event).__name__ + (f":{event.task_id}" if hasattr(event, "task_id") else "") for event in events]


def log_record(event, offset: int) -> LogRecord:
    """The record of tock.events an event was read from, at this offset (what a memory folds)."""
    return LogRecord(topic=EVENTS, partition=0, offset=offset, key=event.dag_id, event=event, timestamp=0.0)
