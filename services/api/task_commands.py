"""Clear, mark and kill task instances (and clear whole runs) through the log."""

from __future__ import annotations

import time

from fastapi import Depends, Request
from sqlalchemy import Engine

from schemas import ClearTask, KillTask, MarkTask
from schemas.tasks import instance_name
from services.api import models, targets
from services.api.auth import requester
from services.api.commands import append, commands, engine_of, once, request_id_of
from services.api.params import MAP_INDEX

TASK = "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}"


@commands.post(f"{TASK}/clear", status_code=202, response_model=models.Accepted, summary="Clear a task instance")
def clear(dag_id: str, run_id: str, task_id: str, request: Request, body: models.ClearRequest | None = None,
          map_index: int = MAP_INDEX, request_id: str = Depends(request_id_of), engine: Engine = Depends(engine_of)):
    """Append ClearTask: run the task instance again with a new try (with ``downstream`` / ``upstream``,
    every task after / before it too). A finished run reopens; a running try is stopped first (its
    runner kills the user code and reports TaskKilled) before the new try is queued. Clearing a task
    that has not run yet in this run changes nothing. ``map_index`` N: only instance N of a mapped task
    (its downstream with ``downstream``). With ``recursive``, each ExternalTaskMarker cleared also clears
    the task it names in another DAG (and what follows it there). 409 if the DAG does not define the task."""
    body = body or models.ClearRequest()
    targets.known_task(engine, dag_id, run_id, task_id, map_index=map_index)
    once(engine, request_id, "ClearTask", dag_id, run_id, task_id)
    event = ClearTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, request_id=request_id,
                      downstream=body.downstream, upstream=body.upstream, recursive=body.recursive,
                      requested_by=requester(request), at=time.time())
    return append(request, event, request_id, run_id=run_id, task_id=task_id)


@commands.post("/api/v1/dags/{dag_id}/runs/{run_id}/clear", status_code=202, response_model=models.Accepted,
               summary="Clear a whole run")
def clear_run(dag_id: str, run_id: str, request: Request, request_id: str = Depends(request_id_of),
              engine: Engine = Depends(engine_of)):
    """Append ClearTask with task_id "": every task of the run runs again (running tries are stopped
    first); a finished run reopens."""
    targets.known_run(engine, dag_id, run_id, active=True)
    once(engine, request_id, "ClearTask", dag_id, run_id, "")
    event = ClearTask(dag_id=dag_id, run_id=run_id, task_id="", request_id=request_id, requested_by=requester(request),
                      at=time.time())
    return append(request, event, request_id, run_id=run_id, task_id="")


@commands.post(f"{TASK}/mark", status_code=202, response_model=models.Accepted, summary="Mark a task instance")
def mark(dag_id: str, run_id: str, task_id: str, body: models.MarkRequest, request: Request,
         map_index: int = MAP_INDEX, request_id: str = Depends(request_id_of), engine: Engine = Depends(engine_of)):
    """Append MarkTask: set the task instance's state to success, failed or skipped by hand, whatever its
    state (a task not queued yet included). A running try is stopped first; the marked state wins over
    that try's own late outcome. Downstream tasks follow: success releases them, failed makes them
    upstream_failed, skipped skips them. The task_instance table shows the mark as soon as it is in the
    log. ``map_index`` N: only instance N of a mapped task. 409 for another state, or a task the DAG
    does not define."""
    targets.known_task(engine, dag_id, run_id, task_id, map_index=map_index)
    state = targets.markable(body.state)
    once(engine, request_id, "MarkTask", dag_id, run_id, task_id)
    event = MarkTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, state=state,
                     request_id=request_id, requested_by=requester(request), at=time.time())
    return append(request, event, request_id, run_id=run_id, task_id=task_id)


@commands.post(f"{TASK}/kill", status_code=202, response_model=models.Accepted, summary="Kill a task's try")
def kill(dag_id: str, run_id: str, task_id: str, request: Request, map_index: int = MAP_INDEX,
         request_id: str = Depends(request_id_of), engine: Engine = Depends(engine_of)):
    """Append KillTask: the task's queued or running try is stopped (its runner kills the user code) and
    ends as killed: failed, not retried, so its downstream tasks become upstream_failed. 409 when the
    task has no such try (its state says why). ``map_index`` N: instance N of a mapped task's try."""
    target = targets.known_task(engine, dag_id, run_id, task_id, active=False, map_index=map_index)
    targets.killable(target, instance_name(task_id, map_index))
    once(engine, request_id, "KillTask", dag_id, run_id, task_id)
    event = KillTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, request_id=request_id,
                     requested_by=requester(request), at=time.time())
    return append(request, event, request_id, run_id=run_id, task_id=task_id)
