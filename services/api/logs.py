"""``GET .../tasks/{task_id}/logs``: a try's log file as text, whole or followed while the try runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from projections import queries
from services.api import targets
from services.api.commands import engine_of
from services.api.task_logs import POLL_SECONDS, log_file, read_from, try_has_ended

logs = APIRouter(tags=["tasks"])
TEXT = "text/plain; charset=utf-8"


@logs.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs", response_class=StreamingResponse,
          summary="A try's log", responses={200: {"content": {TEXT: {}}, "description": "the log, as text"},
                                            404: {"description": "unknown DAG, run, task instance or log"}})
def task_log(dag_id: str, run_id: str, task_id: str, request: Request,
             try_number: int | None = Query(None, alias="try", ge=1, description="the try (default: the latest)"),
             follow: bool = Query(False, description="keep streaming what the try writes until it ends"),
             engine: Engine = Depends(engine_of)):
    """The output of one try of the task instance, from the log file the runner writes under TOCK_HOME
    (``tries/<dag>/<run>/<task>/<try>.log``) on the host this API runs on. With ``follow=true`` the
    response streams what is appended until the task_instance table shows the try has ended (or the
    client disconnects); without it, the file as it is now."""
    instance = _known_instance(engine, dag_id, run_id, task_id)
    if try_number is None:
        if instance is None or instance["try_number"] is None:
            raise HTTPException(status_code=404, detail=f"task {task_id} has not run in run {run_id} yet")
        try_number = instance["try_number"]
    path = log_file(request.app.state.settings.home, dag_id, run_id, task_id, try_number)
    if not follow:
        if not path.is_file():
            raise HTTPException(status_code=404, detail=f"no log of try {try_number} of task {task_id} on this host")
        return StreamingResponse(_whole(path), media_type=TEXT)
    follower = _follow(request, engine, path, (dag_id, run_id, task_id, try_number))
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


def _whole(path: Path) -> Iterator[bytes]:
    offset = 0
    while chunk := read_from(path, offset):
        offset += len(chunk)
        yield chunk


async def _follow(request: Request, engine: Engine, path: Path, try_key: tuple[str, str, str, int]
                  ) -> AsyncIterator[bytes]:
    offset, ended = 0, False
    while not await request.is_disconnected():
        chunk = await run_in_threadpool(read_from, path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
            continue
        if ended:  # the try had ended and everything it wrote is sent
            return
        instance = await run_in_threadpool(queries.task_instance, engine, *try_key[:3])
        ended = try_has_ended(instance, try_key[3])
        if not ended:
            await asyncio.sleep(POLL_SECONDS)
