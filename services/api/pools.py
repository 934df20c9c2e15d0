"""``/api/v1/pools``: Airflow's pools. Reads come from the ``pool`` table; ``PUT`` and ``DELETE`` append
SetPool / DeletePool to the pool's partition of tock.events, whose owner grants its slots
(services/scheduler/core/pools.py). Both are idempotent: the same PUT again sets the same size."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from projections import queries
from schemas import DeletePool, SetPool
from schemas.pools import MOST_SLOTS, pool_problem
from services.api.auth import OPERATOR, VIEWER, requester
from services.api.commands import NotAppended, engine_of, not_appended, request_id_of

pool_reads = APIRouter(tags=["pools"], dependencies=[Depends(VIEWER)],
                       responses={401: {"description": "missing or wrong bearer token"}})
pool_commands = APIRouter(tags=["pools"], dependencies=[Depends(OPERATOR)],
                          responses={401: {"description": "missing or wrong bearer token"},
                                     403: {"description": "the caller's role is not operator or admin"},
                                     409: {"description": "default_pool: it has no cap in Tock"},
                                     503: {"description": "the log did not take the command: retry"}})
NAME = Path(..., description="the pool's name", max_length=250)


class Pool(BaseModel):
    """A pool, as the projector folded its ledger: ``occupied_slots`` are held by granted tries (queued or
    running), ``waiting_slots`` asked for by tries waiting for a grant (Airflow's scheduled slots)."""

    pool: str
    slots: int
    description: str | None = None
    occupied_slots: int
    open_slots: int
    granted_tries: int
    waiting_tries: int
    waiting_slots: int
    updated_at: float | None = None


class PoolBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slots: int = Field(ge=0, le=MOST_SLOTS)
    description: str = Field(default="", max_length=4096)


class PoolChange(BaseModel):
    command: str
    pool: str
    request_id: str


@pool_reads.get("/api/v1/pools", response_model=list[Pool], summary="List pools")
def list_pools(engine: Engine = Depends(engine_of)):
    """Every pool that exists, by name. default_pool is not listed: it has no cap in Tock."""
    return queries.pools(engine, limit=10_000)


@pool_reads.get("/api/v1/pools/{name}", response_model=Pool, summary="A pool")
def get_pool(name: str = NAME, engine: Engine = Depends(engine_of)):
    found = queries.pool(engine, name)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no pool {name!r}")
    return found


@pool_commands.put("/api/v1/pools/{name}", status_code=202, response_model=PoolChange,
                   summary="Create or resize a pool")
def set_pool(body: PoolBody, request: Request, name: str = NAME, request_id: str = Depends(request_id_of)):
    """Append SetPool: the pool has ``slots`` slots from when its owner folds it. Fewer than are held
    takes none back; grants wait until they fit."""
    _refuse(name)
    return _append(request, SetPool(pool=name, slots=body.slots, description=body.description, request_id=request_id,
                                    requested_by=requester(request), at=time.time()), request_id)


@pool_commands.delete("/api/v1/pools/{name}", status_code=202, response_model=PoolChange, summary="Delete a pool")
def delete_pool(request: Request, name: str = NAME, request_id: str = Depends(request_id_of),
                engine: Engine = Depends(engine_of)):
    """Append DeletePool. Slots it granted stay held until their tries end; its tasks wait until it is set
    again. 404 for a pool the tables do not have."""
    _refuse(name)
    if queries.pool(engine, name) is None:
        raise HTTPException(status_code=404, detail=f"no pool {name!r}")
    return _append(request, DeletePool(pool=name, request_id=request_id, requested_by=requester(request),
                                       at=time.time()), request_id)


def _refuse(name: str) -> None:
    problem = pool_problem(name)
    if problem:
        raise HTTPException(status_code=409 if "no cap" in problem else 422, detail=problem)


def _append(request: Request, event: SetPool | DeletePool, request_id: str) -> dict[str, str]:
    try:
        request.app.state.command_log.append(event)
    except NotAppended as failure:
        raise not_appended(failure, "pool command", f"retry with the header Idempotency-Key {request_id}") from None
    request.app.state.metrics.commands.labels(type(event).__name__).inc()
    return {"command": type(event).__name__, "pool": event.pool, "request_id": request_id}
