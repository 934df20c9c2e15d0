"""Command endpoints: each appends one command event to tock.events; none writes a table.

A command needs the operator role (services/api/auth.py) and names its requester. Every command
takes an ``Idempotency-Key`` header, its request id (generated when absent, and returned):
repeating a request with the same key appends the command again with the same request id,
which the scheduler applies once, and gets the same response body.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from confluent_kafka import KafkaException
from fastapi import APIRouter, Depends, Header, HTTPException, Request
from sqlalchemy import Engine

from infra.log import DeliveryFailed, KafkaEventLog
from infra.settings import Settings
from infra.topics import topic_name
from schemas import PauseDag, TriggerDagRun
from schemas.runs import manual_run_id
from services.api import models, targets
from services.api.auth import OPERATOR, requester

log = logging.getLogger("tock.api")
ACK_TIMEOUT = 10.0  # seconds the broker gets to acknowledge a command before the API answers 503


class NotAppended(Exception):
    """The log did not take a command. ``maybe``: the producer queued it but the broker did not acknowledge
    it in time (or said it failed after sending), so it may be in the log all the same."""

    def __init__(self, reason: str, *, maybe: bool) -> None:
        super().__init__(reason)
        self.reason, self.maybe = reason, maybe


class CommandLog:
    """The API's producer, created on first use so read-only use needs no broker."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._log: KafkaEventLog | None = None
        self._lock = threading.Lock()

    def append(self, event) -> str:
        """Append and wait for the broker's acknowledgement; returns the topic. Raises NotAppended."""
        with self._lock:
            try:
                if self._log is None:
                    self._log = KafkaEventLog(self._settings, client_id="tock-api")
                self._log.append(event)
            except (KafkaException, BufferError) as error:  # refused before it left: e.g. a record too large
                raise NotAppended(f"the producer refused it: {error}", maybe=False) from None
            try:
                self._log.flush(ACK_TIMEOUT)
            except DeliveryFailed as error:
                raise NotAppended(str(error), maybe=True) from None
        return topic_name(self._settings.topic_prefix, event.TOPIC)

    def close(self) -> None:
        """Close the producer; idempotent (an app's lifespan may end more than once under test clients)."""
        with self._lock:
            if self._log is not None:
                try:
                    self._log.close(ACK_TIMEOUT)
                except DeliveryFailed as error:  # their requests were answered 503: a retry is applied once
                    log.warning("the API stopped with commands Kafka had not acknowledged: %s", error)
                finally:
                    self._log = None


def request_id_of(idempotency_key: str | None = Header(
        None, alias="Idempotency-Key", pattern=targets.REQUEST_ID_PATTERN,
        description="the command's request id, chosen by the client so a retry is applied once (1 to 128 "
                    "letters, digits, '.', '_', '~', '-'); generated when absent")) -> str:
    return idempotency_key or uuid.uuid4().hex


def engine_of(request: Request) -> Engine:
    return request.app.state.engine


commands = APIRouter(dependencies=[Depends(OPERATOR)], tags=["commands"],
                     responses={401: {"description": "missing or wrong bearer token"},
                                403: {"description": "the caller's role is not operator or admin"},
                                404: {"description": "unknown DAG, run or task instance"},
                                409: {"description": "a command that cannot be carried out, with the reason"},
                                422: {"description": "malformed input"},
                                503: {"description": "the log did not take the command, or did not acknowledge it "
                                                     "in time (then it may be in the log all the same): retry "
                                                     "with the same Idempotency-Key, which is applied once"}})


def not_appended(failure: NotAppended, what: str, retry: str) -> HTTPException:
    """The 503 for a command the log did not take, saying whether it may be there all the same."""
    if failure.maybe:
        detail = (f"Kafka did not acknowledge the {what} within {ACK_TIMEOUT:g} s ({failure.reason}); it may still "
                  f"have been appended, so this does not mean it was lost: {retry}")
    else:
        detail = f"the {what} was not appended to the log ({failure.reason}): {retry}"
    return HTTPException(status_code=503, detail=detail, headers={"Retry-After": "5"})


def append(request: Request, event, request_id: str, *, run_id: str | None = None, task_id: str | None = None,
           backfill_id: str | None = None, tracked: bool = True) -> dict:
    """Append ``event`` and answer with what names it (nothing time-dependent: see :class:`models.Accepted`)."""
    try:
        topic = request.app.state.command_log.append(event)
    except NotAppended as failure:
        retry = (f"retry with the header Idempotency-Key {request_id} (a command is applied once however often it is "
                 f"appended), then see GET /api/v1/commands/{request_id}")
        raise not_appended(failure, "command", retry) from None
    request.app.state.metrics.commands.labels(type(event).__name__).inc()
    return {"command": type(event).__name__, "request_id": request_id, "dag_id": event.dag_id, "run_id": run_id,
            "task_id": task_id, "backfill_id": backfill_id, "topic": topic,
            "status_url": f"/api/v1/commands/{request_id}" if tracked else None}


def once(engine: Engine, request_id: str, command: str, dag_id: str, run_id: str | None = None,
         task_id: str | None = None) -> None:
    """Refuse (409) an Idempotency-Key the log already holds for another command."""
    targets.reused_for_another(engine, request_id, command, dag_id, run_id, task_id)


@commands.post("/api/v1/dags/{dag_id}/runs", status_code=202, response_model=models.Accepted,
               summary="Trigger a manual run")
def trigger(dag_id: str, body: models.TriggerRequest, request: Request, request_id: str = Depends(request_id_of),
            engine: Engine = Depends(engine_of)):
    """Append TriggerDagRun. The run id is ``manual__<request id>``, so a trigger repeated with the same
    Idempotency-Key (before or after its run finished) names the same run and creates it once.
    409 if the DAG's file no longer defines it; 422 for a logical date outside the years 1970 to 9998, a
    conf over TOCK_API_CONF_LIMIT_BYTES as JSON, or a conf the DAG's params refuse (the detail names each
    param and the rule it breaks: its JSON Schema, or a required param the conf does not give)."""
    dag = targets.known_dag(engine, dag_id, active=True)
    run_id = manual_run_id(request_id)
    once(engine, request_id, "TriggerDagRun", dag_id, run_id)
    conf_json = targets.conf_text(body.conf, request.app.state.settings.api_conf_limit_bytes)
    targets.conf_fits(dag, body.conf)
    event = TriggerDagRun(dag_id=dag_id, request_id=request_id, conf_json=conf_json, logical_date=body.logical_date,
                          requested_by=requester(request), at=time.time())
    return append(request, event, request_id, run_id=run_id)


@commands.post("/api/v1/dags/{dag_id}/pause", status_code=202, response_model=models.Accepted,
               summary="Pause a DAG")
def pause(dag_id: str, request: Request, request_id: str = Depends(request_id_of),
          engine: Engine = Depends(engine_of)):
    """Append PauseDag(paused=true): no new task of any run of the DAG starts and no scheduled run is
    created; tries already running finish. Idempotent by nature (PauseDag carries no request id, so it is
    not listed under /api/v1/commands)."""
    targets.known_dag(engine, dag_id)
    return append(request, PauseDag(dag_id=dag_id, paused=True, requested_by=requester(request), at=time.time()),
                  request_id, tracked=False)


@commands.post("/api/v1/dags/{dag_id}/unpause", status_code=202, response_model=models.Accepted,
               summary="Unpause a DAG")
def unpause(dag_id: str, request: Request, request_id: str = Depends(request_id_of),
            engine: Engine = Depends(engine_of)):
    """Append PauseDag(paused=false): the DAG's runs go on and scheduled runs are created again."""
    targets.known_dag(engine, dag_id)
    return append(request, PauseDag(dag_id=dag_id, paused=False, requested_by=requester(request), at=time.time()),
                  request_id, tracked=False)
