"""A synthetic partition history (events as the scheduler and runners would write them), for the
snapshot tests and benchmark. Synthetic: written by the test, not by real runs; every event is a
real, encodable Tock event and folds as a real one would."""

from __future__ import annotations

from collections.abc import Iterator

from schemas import (
    ClearTask,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    PauseDag,
    RequestBackfill,
    TaskDefinition,
    TaskHeartbeat,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)

OWNER = "synthetic-scheduler"
EXECUTOR = "synthetic"  # no executor of that name runs: a probe answers "unknown", never kills


def dag_parsed(dag_id: str, tasks: int, at: float = 0.0, executor: str = EXECUTOR) -> DagParsed:
    """A chain of ``tasks`` bash tasks."""
    definitions = [TaskDefinition(task_id=f"t{index}", kind="bash", command="true",
                                  upstream=[f"t{index - 1}"] if index else [], executor=executor)
                   for index in range(tasks)]
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=definitions,
                               tags=["synthetic"])
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}",
                     definition=definition, at=at)


def finished_run(dag_id: str, number: int, tasks: int, at: float) -> Iterator:
    """A whole manual run: triggered, created, each task queued to succeeded, finished."""
    request = f"{dag_id}-req-{number}"
    run_id = f"manual__{request}"
    yield TriggerDagRun(dag_id=dag_id, request_id=request, at=at)
    yield DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual", dag_fingerprint="fp",
                        scheduler_id=OWNER, at=at)
    for index in range(tasks):
        yield from _try(dag_id, run_id, f"t{index}", at + index)
        yield TaskSucceeded(dag_id=dag_id, run_id=run_id, task_id=f"t{index}", try_number=1,
                            runner_id=f"r-{run_id}", at=at + index + 0.5)
    yield DagRunFinished(dag_id=dag_id, run_id=run_id, state="success", at=at + tasks)


def open_run(dag_id: str, number: int, open_tries: int, at: float) -> Iterator:
    """``open_tries`` runs, each with its first task launched and started, never ended."""
    for index in range(open_tries):
        request = f"{dag_id}-open-{number}-{index}"
        run_id = f"manual__{request}"
        yield TriggerDagRun(dag_id=dag_id, request_id=request, at=at)
        yield DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual",
                            dag_fingerprint="fp", scheduler_id=OWNER, at=at)
        yield from _try(dag_id, run_id, "t0", at)


def _try(dag_id: str, run_id: str, task_id: str, at: float) -> Iterator:
    yield TaskQueued(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=1, executor=EXECUTOR,
                     queue="default", scheduler_id=OWNER, at=at)
    yield TaskLaunched(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=1, executor=EXECUTOR,
                       handle=f"{run_id}/{task_id}", scheduler_id=OWNER, at=at + 0.1)
    yield TaskStarted(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=1, runner_id=f"r-{run_id}",
                      hostname="synthetic-host", pid=1, executor=EXECUTOR, queue="default", at=at + 0.2)


def heartbeats_of_open(dag_id: str, number: int, open_tries: int, at: float) -> Iterator[TaskHeartbeat]:
    for index in range(open_tries):
        run_id = f"manual__{dag_id}-open-{number}-{index}"
        yield TaskHeartbeat(dag_id=dag_id, run_id=run_id, task_id="t0", try_number=1, runner_id=f"r-{run_id}",
                            at=at)


def oddities(dag_id: str, at: float) -> list:
    """Events that fill the rarer parts of the state: a pause, a pending backfill, a rejection."""
    return [PauseDag(dag_id=dag_id, paused=True, at=at),
            RequestBackfill(dag_id=dag_id, request_id=f"{dag_id}-bf", start_date=0.0, end_date=3600.0, at=at),
            ClearTask(dag_id=dag_id, run_id="no-such-run", task_id="", request_id=f"{dag_id}-rej", at=at),
            TriggerDagRun(dag_id=dag_id, request_id=f"{dag_id}-pending", at=at)]


def history(dag_ids: list[str], runs_per_dag: int, tasks: int, open_tries: int, start: float = 1_000.0) -> Iterator:
    """Events of a partition: each DAG parsed, ``runs_per_dag`` finished runs each, then
    ``open_tries`` open tries of the first DAG (heartbeats: ``heartbeats_of_open``)."""
    for dag_id in dag_ids:
        yield dag_parsed(dag_id, tasks, start)
    for number in range(runs_per_dag):
        for dag_id in dag_ids:
            yield from finished_run(dag_id, number, tasks, start + number * 10)
    yield from open_run(dag_ids[0], 0, open_tries, start + runs_per_dag * 10)
