"""Command endpoints: each appends one command event to tock.events; none writes a table.

When TOCK_API_TOKEN is set, a command needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
import uuid

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine

from infra.log import DeliveryFailed, KafkaEventLog
from infra.settings import Settings
from infra.topics import topic_name
from projections import queries
from schemas import ClearTask, MarkTask, PauseDag, TriggerDagRun
from services.api import models

REQUESTED_BY = "api"
_bearer = HTTPBearer(auto_error=False)


class CommandLog:
    """The API's producer, created on first use so read-only use needs no broker."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._log: KafkaEventLog | None = None
        self._lock = threading.Lock()

    def append(self, event) -> str:
        """Append and wait for the broker's acknowledgement; returns the topic."""
        with self._lock:
            if self._log is None:
                self._log = KafkaEventLog(self._settings, client_id="tock-api")
            self._log.append(event)
            self._log.flush(10.0)
        return topic_name(self._settings.topic_prefix, event.TOPIC)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


def authorized(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    token = request.app.state.settings.api_token
    if token is None:
        return
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise HTTPException(status_code=401, detail="commands need a valid bearer token (TOCK_API_TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})


def _engine(request: Request) -> Engine:
    return request.app.state.engine


commands = APIRouter(dependencies=[Depends(authorized)], tags=["commands"],
                     responses={401: {"description": "missing or wrong bearer token"},
                                404: {"description": "unknown DAG or task instance"},
                                503: {"description": "the log did not acknowledge the command"}})


def _append(request: Request, event, request_id: str | None = None) -> dict:
    try:
        topic = request.app.state.command_log.append(event)
    except DeliveryFailed as error:
        raise HTTPException(status_code=503, detail=f"the command was not acknowledged by Kafka: {error}") from None
    request.app.state.metrics.commands.labels(type(event).__name__).inc()
    return {"command": type(event).__name__, "request_id": request_id, "topic": topic}


def _known_dag(engine: Engine, dag_id: str) -> None:
    if queries.dag(engine, dag_id) is None:
        raise HTTPException(status_code=404, detail=f"no DAG {dag_id} (has the DAG processor parsed it?)")


def _known_task_instance(engine: Engine, dag_id: str, run_id: str, task_id: str) -> None:
    if queries.task_instance(engine, dag_id, run_id, task_id) is None:
        raise HTTPException(status_code=404, detail=f"no task instance {task_id} in run {run_id} of DAG {dag_id}")


@commands.post("/api/v1/dags/{dag_id}/runs", status_code=202, response_model=models.Accepted)
def trigger(dag_id: str, body: models.TriggerRequest, request: Request, engine: Engine = Depends(_engine)):
    """Ask for a manual run with ``conf``; the scheduler derives the run id from the request id."""
    _known_dag(engine, dag_id)
    request_id = uuid.uuid4().hex
    event = TriggerDagRun(dag_id=dag_id, request_id=request_id, conf_json=json.dumps(body.conf, sort_keys=True),
                          logical_date=body.logical_date, requested_by=REQUESTED_BY, at=time.time())
    return _append(request, event, request_id)


@commands.post("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/clear", status_code=202,
               response_model=models.Accepted)
def clear(dag_id: str, run_id: str, task_id: str, request: Request, engine: Engine = Depends(_engine)):
    """Run the task instance again with a new try."""
    _known_task_instance(engine, dag_id, run_id, task_id)
    return _append(request, ClearTask(dag_id=dag_id, run_id=run_id, task_id=task_id, requested_by=REQUESTED_BY,
                                      at=time.time()))


@commands.post("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/mark", status_code=202,
               response_model=models.Accepted)
def mark(dag_id: str, run_id: str, task_id: str, body: models.MarkRequest, request: Request,
         engine: Engine = Depends(_engine)):
    """Set the task instance's outcome to success or failed by hand."""
    _known_task_instance(engine, dag_id, run_id, task_id)
    return _append(request, MarkTask(dag_id=dag_id, run_id=run_id, task_id=task_id, state=body.state,
                                     requested_by=REQUESTED_BY, at=time.time()))


@commands.post("/api/v1/dags/{dag_id}/pause", status_code=202, response_model=models.Accepted)
def pause(dag_id: str, request: Request, engine: Engine = Depends(_engine)):
    """Stop creating scheduled runs of the DAG."""
    _known_dag(engine, dag_id)
    return _append(request, PauseDag(dag_id=dag_id, paused=True, requested_by=REQUESTED_BY, at=time.time()))


@commands.post("/api/v1/dags/{dag_id}/unpause", status_code=202, response_model=models.Accepted)
def unpause(dag_id: str, request: Request, engine: Engine = Depends(_engine)):
    """Resume creating scheduled runs of the DAG."""
    _known_dag(engine, dag_id)
    return _append(request, PauseDag(dag_id=dag_id, paused=False, requested_by=REQUESTED_BY, at=time.time()))
