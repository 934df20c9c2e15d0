"""Builders for the priorities-and-limits unit tests: DAG definitions with per-task options, and the
events of runs and tries of any run (scheduler_fixtures.py's builders name one run)."""

from __future__ import annotations

from typing import Any

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    TaskDefinition,
    TaskFailed,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from services.scheduler.core import SchedulerState, decide, fold
from tests.unit.scheduler_fixtures import ME, POLICY


def dag(edges: dict[str, list[str]], *, dag_id: str = "etl", task_options: dict[str, dict[str, Any]] | None = None,
        fingerprint: str = "", **definition: Any) -> DagParsed:
    """A DagParsed of bash tasks (``edges``: task -> its upstream), each with its ``task_options``."""
    options = task_options or {}
    tasks = [TaskDefinition(task_id=task_id, kind="bash", command="true", upstream=ups, **options.get(task_id, {}))
             for task_id, ups in edges.items()]
    built = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=tasks, **definition)
    return DagParsed(dag_id=dag_id, file_path=built.file_path, fingerprint=fingerprint or f"fp-{dag_id}",
                     definition=built, at=0.0)


def run(run_id: str, logical_date: float, at: float = 1.0, dag_id: str = "etl") -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=logical_date, run_type="manual",
                         dag_fingerprint="fp", scheduler_id=ME, at=at)


def queued(run_id: str, task_id: str, try_number: int = 1, at: float = 2.0, dag_id: str = "etl") -> TaskQueued:
    return TaskQueued(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, executor="local",
                      queue="default", scheduler_id=ME, at=at)


def launched(run_id: str, task_id: str, try_number: int = 1, at: float = 3.0) -> TaskLaunched:
    return TaskLaunched(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number, executor="local",
                        handle=f"{run_id}.{task_id}.{try_number}", scheduler_id=ME, at=at)


def started(run_id: str, task_id: str, try_number: int = 1, at: float = 4.0) -> TaskStarted:
    return TaskStarted(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number,
                       runner_id=f"r-{run_id}-{task_id}-{try_number}", hostname="h", pid=1, at=at)


def succeeded(run_id: str, task_id: str, try_number: int = 1, at: float = 6.0) -> TaskSucceeded:
    return TaskSucceeded(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number,
                         runner_id=f"r-{run_id}-{task_id}-{try_number}", at=at)


def failed(run_id: str, task_id: str, try_number: int = 1, at: float = 6.0) -> TaskFailed:
    return TaskFailed(dag_id="etl", run_id=run_id, task_id=task_id, try_number=try_number,
                      runner_id=f"r-{run_id}-{task_id}-{try_number}", error="boom", at=at)


def running(run_id: str, task_id: str, try_number: int = 1, at: float = 2.0) -> list:
    """A try queued, launched and started."""
    return [queued(run_id, task_id, try_number, at), launched(run_id, task_id, try_number, at + 1),
            started(run_id, task_id, try_number, at + 2)]


def state_of(*events: Any) -> SchedulerState:
    return fold(SchedulerState(), events)


def queued_now(state: SchedulerState, now: float = 10.0) -> list[tuple[str, str]]:
    """(run id, task id) of the tries ``decide`` queues now, in the order it writes them."""
    return [(event.run_id, event.task_id) for event in decide(state, now, POLICY) if isinstance(event, TaskQueued)]
