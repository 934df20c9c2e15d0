"""Backfills (request, cancel, progress) and a command's status by its request id."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, HTTPException, Request
from sqlalchemy import Engine

from projections import queries
from schemas import CancelBackfill, RequestBackfill
from services.api import models, targets
from services.api.auth import requester
from services.api.commands import append, commands, engine_of, once, request_id_of
from services.api.params import LIMIT, OFFSET

BACKFILLS = "/api/v1/dags/{dag_id}/backfills"
ENDED = ("success", "failed", "cancelled", "rejected")
status = APIRouter(tags=["commands"])


@commands.post(BACKFILLS, status_code=202, response_model=models.Accepted, summary="Backfill a date range")
def request_backfill(dag_id: str, body: models.BackfillRequest, request: Request,
                     request_id: str = Depends(request_id_of), engine: Engine = Depends(engine_of)):
    """Append RequestBackfill; its backfill id is the request id. The scheduler plans every schedule
    interval whose logical date is in [start_date, end_date] (BackfillPlanned) and skips dates that
    already have a run (with ``reprocess_failed``, a failed run is reopened and its failed tasks
    cleared); it creates runs ``backfill__<logical date>`` as the DAG's max_active_runs allows and
    finishes the backfill when they have ended. Follow it at ``GET .../backfills/{backfill_id}``.
    409 for a DAG without a recurring schedule, or an end before the start; 422 for a malformed date, one
    outside the years 1970 to 9998, a range whose schedule would pass the year 9999, a conf over
    TOCK_API_CONF_LIMIT_BYTES as JSON, or one the DAG's params refuse (naming the param and the rule)."""
    try:
        start, end = targets.parse_instant(body.start_date), targets.parse_instant(body.end_date)
    except ValueError as error:
        raise HTTPException(status_code=422, detail=f"invalid request: {error}") from None
    dag = targets.known_dag(engine, dag_id, active=True)
    targets.backfill_range(dag, start, end)
    conf_json = targets.conf_text(body.conf, request.app.state.settings.api_conf_limit_bytes)
    targets.conf_fits(dag, body.conf)
    once(engine, request_id, "RequestBackfill", dag_id)
    event = RequestBackfill(dag_id=dag_id, request_id=request_id, start_date=start, end_date=end,
                            reprocess_failed=body.reprocess_failed, conf_json=conf_json,
                            requested_by=requester(request), at=time.time())
    return append(request, event, request_id, backfill_id=request_id)


@commands.post(f"{BACKFILLS}/{{backfill_id}}/cancel", status_code=202, response_model=models.Accepted,
               summary="Cancel a backfill")
def cancel_backfill(dag_id: str, backfill_id: str, request: Request, request_id: str = Depends(request_id_of),
                    engine: Engine = Depends(engine_of)):
    """Append CancelBackfill: the backfill creates no more runs; runs it created go on to their end, and
    it finishes as cancelled. Idempotent by nature. 404 for an unknown backfill, 409 for one that ended."""
    targets.known_dag(engine, dag_id)
    row = queries.backfill(engine, dag_id, backfill_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"no backfill {backfill_id} of DAG {dag_id}")
    if row["state"] in ENDED:
        raise HTTPException(status_code=409, detail=f"backfill {backfill_id} has ended ({row['state']})")
    event = CancelBackfill(dag_id=dag_id, backfill_id=backfill_id, requested_by=requester(request), at=time.time())
    return append(request, event, request_id, backfill_id=backfill_id, tracked=False)


@status.get(BACKFILLS, response_model=models.Page[models.Backfill], summary="List a DAG's backfills")
def list_backfills(dag_id: str, limit: int = LIMIT, offset: int = OFFSET,
                   engine: Engine = Depends(engine_of)):
    """The DAG's backfills, newest first: state (requested, running, success, failed, cancelled,
    rejected), planned logical dates, and how many of their runs are created and finished."""
    targets.known_dag(engine, dag_id)
    return {"items": queries.backfills(engine, dag_id, limit=limit, offset=offset), "limit": limit,
            "offset": offset}


@status.get(f"{BACKFILLS}/{{backfill_id}}", response_model=models.Backfill, summary="A backfill's progress")
def get_backfill(dag_id: str, backfill_id: str, engine: Engine = Depends(engine_of)):
    """One backfill: its state, its ``planned`` runs, and how many are ``created`` and ``finished``."""
    row = queries.backfill(engine, dag_id, backfill_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"no backfill {backfill_id} of DAG {dag_id}")
    return row


@status.get("/api/v1/commands/{request_id}", response_model=models.Command, summary="A command's status")
def command_status(request_id: str, engine: Engine = Depends(engine_of)):
    """The command appended with this request id: ``accepted`` once it is in the log, or ``rejected`` with
    the scheduler's reason (e.g. its run is unknown). ``appended`` counts the times it was appended (retries);
    it was applied at most once. 404 until the projector has read it (and for pause / cancel, which carry
    no request id)."""
    rows = queries.commands(engine, request_id)
    if not rows:
        raise HTTPException(status_code=404, detail=f"no command with request id {request_id} in the tables")
    return rows[0]
