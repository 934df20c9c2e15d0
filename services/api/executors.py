"""``GET /api/v1/executors``: each executor's queued and running tries per queue, and its workers."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from projections.executor_status import read_executor_status, silence_limit

executors = APIRouter()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueueTries(_Strict):
    queue: str | None
    queued: int
    running: int


class ExecutorWorker(_Strict):
    worker: str
    kind: Literal["worker", "scheduler"] = Field(description="the local executor's workers are the schedulers")
    state: Literal["alive", "dead", "stopped"]
    hostname: str | None
    pid: int | None
    queues: list[str]
    concurrency: int | None
    last_heartbeat: float | None
    age: float | None = Field(description="seconds since the last heartbeat")
    stopped_at: float | None


class ExecutorStatus(_Strict):
    executor: str
    configured: bool = Field(description="named in TOCK_EXECUTORS")
    queued: int
    running: int
    queues: list[QueueTries]
    workers_alive: int
    workers_seen: int
    last_task_heartbeat: float | None
    workers: list[ExecutorWorker]


class ExecutorsStatus(_Strict):
    items: list[ExecutorStatus]
    at: float = Field(description="when liveness was judged (seconds since the epoch)")
    silence_limit: float = Field(description="seconds without a heartbeat after which a worker is dead")


def _status(request: Request) -> ExecutorsStatus:
    settings = request.app.state.settings
    engine: Engine = request.app.state.engine
    now, limit = time.time(), silence_limit(settings.task_heartbeat_seconds)
    items = read_executor_status(engine, now=now, limit=limit, configured=settings.available_executors)
    return ExecutorsStatus(items=items, at=now, silence_limit=limit)


@executors.get("/api/v1/executors", response_model=ExecutorsStatus, tags=["executors"])
def list_executors(status: ExecutorsStatus = Depends(_status)):
    """Per executor: queued and running tries per queue (folded from the log), its workers with their
    liveness (the local executor's are the schedulers), and the last task heartbeat seen."""
    return status


@executors.get("/api/v1/executors/{executor}", response_model=ExecutorStatus, tags=["executors"])
def get_executor(executor: str, status: ExecutorsStatus = Depends(_status)):
    for entry in status.items:
        if entry.executor == executor:
            return entry
    known = ", ".join(entry.executor for entry in status.items) or "none"
    raise HTTPException(status_code=404, detail=f"no executor {executor}: not in TOCK_EXECUTORS, and no try or "
                                                f"worker of it in the log; known: {known}")
