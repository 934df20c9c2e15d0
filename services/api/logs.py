"""``GET .../tasks/{task_id}/logs``: a try's log as text, read from ``tock.logs`` wherever the try ran,
whole or followed while the try runs."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import astuple, replace

from confluent_kafka import KafkaException
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from infra.settings import Settings
from projections import queries
from services.api import targets
from services.api.auth import requester
from services.api.commands import engine_of
from services.api.params import MAP_INDEX, TRY
from services.api.task_logs import TryRef, file_chunks, log_file, shipped_texts, try_has_ended, try_start

logs = APIRouter(tags=["tasks"])
TEXT = "text/plain; charset=utf-8"


class FollowSlots:
    """How many log follows each user holds open (each holds a Kafka consumer and a thread while it
    polls), at most ``limit`` per user: TOCK_API_LOG_FOLLOWS_PER_USER."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, username: str) -> FollowSlot:
        """A slot of ``username``'s (429 when they hold ``limit``); release it when the follow ends."""
        with self._lock:
            if self._held.get(username, 0) >= self.limit:
                raise HTTPException(status_code=429, detail=f"{username} already follows {self.limit} task logs "
                                                            "(TOCK_API_LOG_FOLLOWS_PER_USER): end one first")
            self._held[username] = self._held.get(username, 0) + 1
        return FollowSlot(self, username)

    def _give_back(self, username: str) -> None:
        with self._lock:
            left = self._held.get(username, 0) - 1
            if left > 0:
                self._held[username] = left
            else:
                self._held.pop(username, None)

    def held(self, username: str) -> int:
        with self._lock:
            return self._held.get(username, 0)


class FollowSlot:
    """One follow's slot; released once, by whichever of its ends comes first."""

    def __init__(self, slots: FollowSlots, username: str) -> None:
        self._slots, self._username, self._released = slots, username, threading.Event()

    def release(self) -> None:
        if not self._released.is_set():
            self._released.set()
            self._slots._give_back(self._username)


@logs.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs", response_class=StreamingResponse,
          summary="A try's log", responses={200: {"content": {TEXT: {}}, "description": "the log, as text"},
                                            404: {"description": "unknown DAG, run, task instance, try or log"},
                                            429: {"description": "the user follows too many logs at once"},
                                            503: {"description": "tock.logs cannot be read"}})
def task_log(dag_id: str, run_id: str, task_id: str, request: Request,
             try_number: int | None = TRY,
             map_index: int = MAP_INDEX,
             follow: bool = Query(False, description="keep streaming what the try writes until it ends"),
             engine: Engine = Depends(engine_of)):
    """The output of one try of the task instance, as its runner shipped it to ``tock.logs`` (from
    whichever host ran it). With ``follow=true`` the response streams the try's lines until its last
    one, or until the task_instance table shows the try has ended (or the client disconnects, or
    TOCK_API_LOG_FOLLOW_SECONDS have passed: ask again to read on); a user follows at most
    TOCK_API_LOG_FOLLOWS_PER_USER logs at once (429 beyond). Without it, what is there now. A try
    that has not run (a number past the latest try) is a 404; so is a mapped task without
    ``map_index`` (each instance has its own tries). A try with nothing in ``tock.logs`` (older than its
    retention): its file under TOCK_HOME (``tries/<dag>/<run>/<task>/<try>.log``, ``<try>.mN.log`` for
    instance N) if this host has it."""
    return log_response(request, engine, TryRef(dag_id, run_id, task_id, try_number or 0, map_index), follow)


def log_response(request: Request, engine: Engine, asked: TryRef, follow: bool) -> StreamingResponse:
    """The try's log, whole or followed (the API's route and the web UI's task page both answer with it);
    ``asked.try_number`` 0: the latest try."""
    instance = _known_instance(engine, asked)
    try_number = asked.try_number
    if not try_number:
        if instance is None or instance["try_number"] is None:
            mapped = " (a mapped task: name an instance with map_index)" if queries.is_mapped_whole(instance) else ""
            raise HTTPException(status_code=404, detail=f"task {asked.named} has not run in run {asked.run_id} "
                                                        f"yet{mapped}")
        try_number = instance["try_number"]
    _has_run(instance, asked.named, try_number)
    settings, try_ref = request.app.state.settings, replace(asked, try_number=try_number)
    since = try_start(engine, try_ref, instance)
    if not follow:
        return StreamingResponse(_whole(settings, try_ref, since), media_type=TEXT)
    slot = request.app.state.log_follows.take(requester(request))
    follower = _follow(request, engine, settings, try_ref, since, slot)
    weakref.finalize(follower, slot.release)  # a stream never started still gives its slot back
    headers = {"Cache-Control": "no-cache", "X-Tock-Follow-Seconds": f"{settings.api_log_follow_seconds:g}"}
    return StreamingResponse(follower, media_type=TEXT, headers=headers, background=BackgroundTask(slot.release))


def _has_run(instance: dict | None, task_id: str, try_number: int) -> None:
    """404 for a try past the task instance's latest: following it would wait for a try that may never be."""
    latest = instance["try_number"] if instance is not None else None
    if latest is None or try_number > latest:
        ran = f"its latest try is {latest}" if latest is not None else "it has not run yet"
        raise HTTPException(status_code=404, detail=f"no try {try_number} of task {task_id}: {ran}")


def _known_instance(engine: Engine, asked: TryRef) -> dict | None:
    try:
        dag, _run = targets.known_run(engine, asked.dag_id, asked.run_id)
    except targets.Refused as refused:
        raise HTTPException(status_code=404, detail=refused.reason) from None
    instance = asked.instance(engine)
    if instance is None and asked.task_id not in targets.task_ids(dag):
        raise HTTPException(status_code=404, detail=f"no task instance {asked.named} in run {asked.run_id} of DAG "
                                                    f"{asked.dag_id}")
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
                                                    f"{try_ref.named} in tock.logs, nor on this host")
    return file_chunks(path)


async def _follow(request: Request, engine: Engine, settings: Settings, try_ref: TryRef,
                  since: float, slot: FollowSlot) -> AsyncIterator[bytes]:
    def ended() -> bool:
        return try_has_ended(try_ref.instance(engine), try_ref.try_number)

    deadline = time.monotonic() + settings.api_log_follow_seconds
    batches, found = shipped_texts(settings, try_ref, since, ended), False
    try:
        while not await request.is_disconnected() and time.monotonic() < deadline:
            batch = await run_in_threadpool(next, batches, None)
            if batch is None:
                break
            found = batch.found
            for text in batch.texts:
                yield text.encode()
        if not found and not await request.is_disconnected():
            for chunk in file_chunks(log_file(settings.home, *astuple(try_ref))):
                yield chunk
    finally:
        batches.close()
        slot.release()
