"""``/api/v1/assets``: Airflow's assets and asset events. Reads come from the ``asset`` and ``asset_event``
tables (projections/asset.py); ``POST /api/v1/assets/events`` appends an AssetEventRecorded to the asset's
partition of tock.events, whose owner hands it to the DAGs scheduled on the asset
(services/scheduler/core/assets.py). Its event id is ``api/<request id>``: a request repeated with its
Idempotency-Key is the same event, applied once."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from projections import queries
from schemas import AssetEventRecorded
from schemas.assets import URI_MOST, asset_problem
from services.api import models
from services.api.auth import OPERATOR, VIEWER, requester
from services.api.commands import NotAppended, engine_of, not_appended, request_id_of
from services.api.params import LIMIT, OFFSET

asset_reads = APIRouter(tags=["assets"], dependencies=[Depends(VIEWER)],
                        responses={401: {"description": "missing or wrong bearer token"}})
asset_commands = APIRouter(tags=["assets"], dependencies=[Depends(OPERATOR)],
                           responses={401: {"description": "missing or wrong bearer token"},
                                      403: {"description": "the caller's role is not operator or admin"},
                                      409: {"description": "the Idempotency-Key named an event of another asset"},
                                      422: {"description": "malformed input, or an asset uri or extra refused"},
                                      503: {"description": "the log did not take the event: retry with the same "
                                                           "Idempotency-Key, which is applied once"}})
URI = Path(..., description="the asset's uri (its slashes as they are, or percent-encoded)", max_length=URI_MOST)
API_EVENT_PREFIX = "api/"


class ProducingTask(BaseModel):
    dag_id: str
    task_id: str


class Asset(BaseModel):
    """An asset, as the DAGs' current definitions and its ledger say: the tasks that update it (their
    outlets), the DAGs registered to consume it (scheduled on it), and its events, each counted once."""

    uri: str
    name: str = Field(description="its name (the definition parsed last; with none, its latest event's)")
    group: str
    extra: Any = Field(None, description="the asset's own extra (a JSON object), as its definition says")
    producing_tasks: list[ProducingTask]
    consuming_dags: list[str] = Field(description="the DAGs its events are handed to")
    defined_by: list[str] = Field(description="the DAGs whose current definition names it")
    event_count: int
    last_event_at: float | None = Field(None, description="when its latest event happened")
    updated_at: float | None = None


class ConsumingRun(BaseModel):
    dag_id: str
    run_id: str


class AssetEvent(BaseModel):
    """An update of an asset: by a try's success (``source_*`` name it) or appended by an operator
    (``requested_by``), with the runs it triggered."""

    uri: str
    event_id: str
    name: str
    group: str
    extra: Any = Field(None, description="the event's extra (a JSON object)")
    source_dag_id: str
    source_run_id: str
    source_task_id: str
    source_map_index: int
    source_alias: str = Field(description='the asset alias it was added through ("" none)')
    requested_by: str | None = Field(None, description='who appended it ("" a try\'s; null: not read yet)')
    timestamp: float = Field(description="when it happened")
    recorded_at: float | None = Field(None, description="when its record was written (null: only a run that "
                                                        "consumed it is read so far)")
    consumed_by: list[ConsumingRun] = Field(description="the asset-triggered runs it triggered")


class AssetEventBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uri: str = Field(description="the asset's uri", max_length=URI_MOST)
    name: str = Field(default="", max_length=URI_MOST, description="its name (default: none given)")
    extra: models.Conf = Field(default_factory=dict, description="the event's extra (a JSON object; finite "
                                                                 "numbers)")


class AssetEventAccepted(BaseModel):
    """The event is in the log; the asset's owner hands it to its consumers. The body depends only on the
    request, so repeating it with its Idempotency-Key gets the same body."""

    event_id: str
    uri: str
    request_id: str


@asset_reads.get("/api/v1/assets", response_model=models.Page[Asset], summary="List assets")
def list_assets(search: str | None = Query(None, max_length=URI_MOST, description="a part of the uri or name"),
                limit: int = LIMIT, offset: int = OFFSET, engine: Engine = Depends(engine_of)) -> dict[str, Any]:
    """Assets by uri: those a DAG's definition names (a task's outlet, a schedule) before any event, and
    those only events updated."""
    return {"items": queries.assets(engine, search=search, limit=limit, offset=offset), "limit": limit,
            "offset": offset}


@asset_reads.get("/api/v1/assets/events", response_model=models.Page[AssetEvent], summary="List asset events")
def list_asset_events(uri: str | None = Query(None, max_length=URI_MOST, description="of this asset only"),
                      source_dag_id: str | None = Query(None, description="produced by this DAG's tries only"),
                      limit: int = LIMIT, offset: int = OFFSET, engine: Engine = Depends(engine_of)) -> dict[str, Any]:
    """Asset events, newest first by when they happened, each with the runs it triggered."""
    items = queries.asset_events(engine, uri=uri, source_dag_id=source_dag_id, limit=limit, offset=offset)
    return {"items": items, "limit": limit, "offset": offset}


# Declared after /api/v1/assets/events, which it would match: an asset whose uri is "events" is listed, and
# read with GET /api/v1/assets?search=events.
@asset_reads.get("/api/v1/assets/{uri:path}", response_model=Asset, summary="An asset")
def get_asset(uri: str = URI, engine: Engine = Depends(engine_of)) -> dict[str, Any]:
    found = queries.asset(engine, uri)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no asset {uri!r}")
    return found


@asset_commands.post("/api/v1/assets/events", status_code=202, response_model=AssetEventAccepted,
                     summary="Create an asset event")
def create_asset_event(body: AssetEventBody, request: Request, request_id: str = Depends(request_id_of),
                       engine: Engine = Depends(engine_of)) -> dict[str, str]:
    """Append AssetEventRecorded (event id ``api/<request id>``): the asset is updated as a task's outlet
    would be, and the DAGs scheduled on it see the event. An asset no DAG names yet is created by it."""
    extra_json = json.dumps(body.extra, sort_keys=True)
    problem = event_problem(body.uri, body.name, extra_json)
    if problem:
        raise HTTPException(status_code=422, detail=problem)
    event_id = API_EVENT_PREFIX + request_id
    _once(engine, event_id, body.uri, request_id)
    now = time.time()
    event = AssetEventRecorded(uri=body.uri, name=body.name, extra_json=extra_json, event_id=event_id,
                               requested_by=requester(request), timestamp=now, at=now)
    try:
        request.app.state.command_log.append(event)
    except NotAppended as failure:
        raise not_appended(failure, "asset event", f"retry with the header Idempotency-Key {request_id}") from None
    request.app.state.metrics.commands.labels(type(event).__name__).inc()
    return {"event_id": event_id, "uri": body.uri, "request_id": request_id}


def event_problem(uri: str, name: str, extra_json: str) -> str:
    """What is wrong with an asset event an operator asks for, in words ("" nothing): schemas.assets'
    rules, a name as long as a uri may be, and text the log and the tables can hold (the API and the CLI)."""
    problem = asset_problem(uri, extra_json)
    if problem:
        return problem
    if len(name) > URI_MOST:
        return f"an asset's name is at most {URI_MOST} characters"
    for what, text in (("uri", uri), ("name", name)):
        if "\x00" in text or not _encodable(text):
            return f"an asset's {what} cannot hold a NUL character or a lone surrogate, got {text!r:.80}"
    return ""


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _once(engine: Engine, event_id: str, uri: str, request_id: str) -> None:
    """Refuse (409) an Idempotency-Key already used for an event of another asset."""
    other = next((row["uri"] for row in queries.asset_events_with_id(engine, event_id) if row["uri"] != uri), None)
    if other is not None:
        raise HTTPException(status_code=409, detail=f"the Idempotency-Key {request_id} was used for an event of "
                                                    f"asset {other!r}; choose another key for {uri!r}")
