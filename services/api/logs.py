"""``GET .../tasks/{task_id}/logs``: a try's log as text, read from ``tock.logs`` wherever the try ran,
whole or followed while the try runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import astuple

from confluent_kafka import KafkaException
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from infra.settings import Settings
from projections import queries
from services.api import targets
from services.api.commands import engine_of
from services.api.task_logs import TryRef, file_chunks, log_file, shipped_texts, try_has_ended, try_start

logs = APIRouter(tags=["tasks"])
TEXT = "text/plain; charset=utf-8"


@logs.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs", response_class=StreamingResponse,
          summary="A try's log", responses={200: {"content": {TEXT: {}}, "description": "the log, as text"},
                                            404: {"description": "unknown DAG, run, task instance or log"},
                                            503: {"description": "tock.logs cannot be read"}})
def task_log(dag_id: str, run_id: str, task_id: str, request: Request,
             try_number: int | None = Query(None, alias="try", ge=1, description="the try (default: the latest)"),
             follow: bool = Query(False, description="keep streaming what the try writes until it ends"),
             engine: Engine = Depends(engine_of)):
    """The output of one try of the task instance, as its runner shipped it to ``tock.logs`` (from
    whichever host ran it). With ``follow=true`` the response streams the try's lines until its last
    one, or until the task_instance table shows the try has ended (or the client disconnects);
    without it, what is there now. A try with nothing in ``tock.logs`` (older than its retention):
    its file under TOCK_HOME (``tries/<dag>/<run>/<task>/<try>.log``) if this host has it."""
    return log_response(request, engine, dag_id, run_id, task_id, try_number, follow)


def log_response(request: Request, engine: Engine, dag_id: str, run_id: str, task_id: str,
                 try_number: int | None, follow: bool) -> StreamingResponse:
    """The try's log, whole or followed (the API's route and the web UI's task page both answer with it)."""
    instance = _known_instance(engine, dag_id, run_id, task_id)
    if try_number is None:
        if instance is None or instance["try_number"] is None:
            raise HTTPException(status_code=404, detail=f"task {task_id} has not run in run {run_id} yet")
        try_number = instance["try_number"]
    settings, try_ref = request.app.state.settings, TryRef(dag_id, run_id, task_id, try_number)
    since = try_start(engine, try_ref, instance)
    if not follow:
        return StreamingResponse(_whole(settings, try_ref, since), media_type=TEXT)
    follower = _follow(request, engine, settings, try_ref, since)
    return StreamingResponse(follower, media_type=TEXT, headers={"Cache-Control": "no-cache"})


def _known_instance(engine: Engine, dag_id: str, run_id: str, task_id: str) -> dict | None:
    try:
        dag, _run = targets.known_run(engine, dag_id, run_id)
    except targets.Refused as refused:
        raise HTTPException(status_code=404, detail=refused.reason) from None
    instance = queries.task_instance(engine, dag_id, run_id, task_id)
    if instance is None and task_id not in targets.task_ids(dag):
        raise HTTPException(status_code=404, detail=f"no task instance {task_id} in run {run_id} of DAG {dag_id}")
    return instance


def _whole(settings: Settings, try_ref: TryRef, since: float) -> Iterator[bytes]:
    """What tock.logs holds of the try now (read before answering, so a missing log is a 404)."""
    texts, found = [], False
    try:
        for batch in shipped_texts(settings, try_ref, since):
            texts.extend(batch.texts)
            found = batch.found
    except KafkaException as error:
        raise HTTPException(status_code=503, detail=f"cannot read tock.logs: {error}") from None
    if found:
        return iter([text.encode() for text in texts])
    path = log_file(settings.home, *astuple(try_ref))
    if not path.is_file():
        raise HTTPException(status_code=404, detail=f"no log of try {try_ref.try_number} of task "
                                                    f"{try_ref.task_id} in tock.logs, nor on this host")
    return file_chunks(path)


async def _follow(request: Request, engine: Engine, settings: Settings, try_ref: TryRef,
                  since: float) -> AsyncIterator[bytes]:
    def ended() -> bool:
        return try_has_ended(queries.task_instance(engine, *astuple(try_ref)[:3]), try_ref.try_number)

    batches, found = shipped_texts(settings, try_ref, since, ended), False
    try:
        while not await request.is_disconnected():
            batch = await run_in_threadpool(next, batches, None)
            if batch is None:
                break
            found = batch.found
            for text in batch.texts:
                yield text.encode()
    finally:
        batches.close()
    if not found and not await request.is_disconnected():
        for chunk in file_chunks(log_file(settings.home, *astuple(try_ref))):
            yield chunk
