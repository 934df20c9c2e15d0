"""``/api/v1/variables`` and ``/api/v1/connections``: Tock's store of variables and connections, for admins.

Reads replay tock.secrets to its end (the store is small, and compacted); changes append VariableSet /
ConnectionSet (values encrypted with the Fernet key) or their deletions, and nothing when they would
change nothing, so a retried PUT is applied once. Lists never hold values; a connection's password
is ``***`` unless ``?reveal=true``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cryptography.fernet import Fernet
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from infra.secrets import manage
from infra.secrets.keys import FernetKeyMissing, NotDecrypted, fernet_of
from infra.secrets.store import StoredSecrets, connection_fields, read_store, variable_value
from services.api.auth import ADMIN, requester
from services.api.commands import NotAppended, not_appended
from tock.connections import FIELDS, Connection

T = TypeVar("T")
secrets = APIRouter(tags=["variables and connections"], dependencies=[Depends(ADMIN)],
                    responses={401: {"description": "missing or wrong bearer token"},
                               403: {"description": "the caller is not an admin"},
                               503: {"description": "the store cannot be read (broker down, no Fernet key)"}})


class VariableBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(max_length=512 * 1024)
    description: str | None = Field(default=None, max_length=4096)


class ConnectionBody(BaseModel):
    """A connection: its ``uri``, or its fields."""

    model_config = ConfigDict(extra="forbid")
    uri: str | None = None
    conn_type: str | None = None
    description: str | None = None
    host: str | None = None
    login: str | None = None
    password: str | None = None
    schema_: str | None = Field(default=None, alias="schema")
    port: int | None = Field(default=None, ge=0, le=65535)
    extra: dict[str, Any] | str | None = None


class Change(BaseModel):
    name: str
    event: str | None  # None: it was so already, nothing appended


def _read(request: Request) -> StoredSecrets:
    """The store as the log has it (only names, types and descriptions are readable without the key)."""
    try:
        return read_store(request.app.state.settings)
    except RuntimeError as error:
        raise HTTPException(status_code=503, detail=f"cannot read Tock's store: {error}") from None


def _fernet(request: Request) -> Fernet:
    try:
        return fernet_of(request.app.state.settings)
    except FernetKeyMissing as error:
        raise HTTPException(status_code=503, detail=f"cannot decrypt or encrypt Tock's store: {error}") from None


def _decrypted(read: Callable[[], T]) -> T:
    try:
        return read()
    except NotDecrypted as error:
        raise HTTPException(status_code=503, detail=str(error)) from None


def _append(request: Request, name: str, events: Sequence[Any]) -> dict[str, Any]:
    for event in events:
        try:
            request.app.state.command_log.append(event)
        except NotAppended as failure:
            raise not_appended(failure, "change", "read it back before trying again") from None
    return {"name": name, "event": type(events[0]).__name__ if events else None}


@secrets.get("/api/v1/variables", summary="List variables (keys and descriptions, never values)")
def list_variables(request: Request) -> list[dict[str, Any]]:
    state = _read(request)
    return [{"key": key, "description": stored.description, "set_by": stored.set_by, "set_at": stored.at}
            for key, stored in sorted(state.variables.items())]


@secrets.get("/api/v1/variables/{key}", summary="A variable and its value", responses={404: {"description": "none"}})
def get_variable(key: str, request: Request) -> dict[str, Any]:
    stored = _read(request).variables.get(key)
    if stored is None:
        raise HTTPException(status_code=404, detail=f"no variable {key}")
    fernet = _fernet(request)
    return {"key": key, "value": _decrypted(lambda: variable_value(fernet, stored)),
            "description": stored.description}


@secrets.put("/api/v1/variables/{key}", response_model=Change, summary="Set a variable")
def put_variable(body: VariableBody, request: Request, key: str = Path(pattern=manage.KEY_PATTERN)) -> dict[str, Any]:
    fernet, state = _fernet(request), _read(request)
    return _append(request, key, _decrypted(lambda: manage.set_variable(
        state, fernet, key, body.value, body.description, by=requester(request), at=time.time())))


@secrets.delete("/api/v1/variables/{key}", response_model=Change, summary="Delete a variable",
                responses={404: {"description": "no such variable"}})
def delete_variable(key: str, request: Request) -> dict[str, Any]:
    events = manage.delete_variable(_read(request), key, by=requester(request), at=time.time())
    if not events:
        raise HTTPException(status_code=404, detail=f"no variable {key}")
    return _append(request, key, events)


@secrets.get("/api/v1/connections", summary="List connections (ids, types and descriptions)")
def list_connections(request: Request) -> list[dict[str, Any]]:
    state = _read(request)
    return [{"conn_id": conn_id, "conn_type": stored.conn_type, "description": stored.description,
             "set_by": stored.set_by, "set_at": stored.at} for conn_id, stored in sorted(state.connections.items())]


@secrets.get("/api/v1/connections/{conn_id}", summary="A connection", responses={404: {"description": "none"}})
def get_connection(conn_id: str, request: Request, reveal: bool = Query(False)) -> dict[str, Any]:
    stored = _read(request).connections.get(conn_id)
    if stored is None:
        raise HTTPException(status_code=404, detail=f"no connection {conn_id}")
    fernet = _fernet(request)
    fields = _decrypted(lambda: connection_fields(fernet, stored))
    return {"conn_id": conn_id, **(fields if reveal else manage.redacted(fields))}


@secrets.put("/api/v1/connections/{conn_id}", response_model=Change, summary="Set a connection",
             responses={422: {"description": "both a uri and fields, or a bad uri"}})
def put_connection(body: ConnectionBody, request: Request,
                   conn_id: str = Path(pattern=manage.KEY_PATTERN)) -> dict[str, Any]:
    connection = _connection(conn_id, body)
    fernet, state = _fernet(request), _read(request)
    return _append(request, conn_id, _decrypted(lambda: manage.set_connection(
        state, fernet, conn_id, connection.to_dict(), by=requester(request), at=time.time())))


def _connection(conn_id: str, body: ConnectionBody) -> Connection:
    fields = body.model_dump(by_alias=True, exclude={"uri"}, exclude_none=True)
    try:
        if body.uri is not None:
            connection = Connection(conn_id=conn_id, uri=body.uri, description=fields.pop("description", None),
                                    **fields)
        else:
            connection = Connection(conn_id=conn_id, **{name: fields[name] for name in FIELDS if name in fields})
    except ValueError as error:
        raise HTTPException(status_code=422, detail=str(error)) from None
    return connection


@secrets.delete("/api/v1/connections/{conn_id}", response_model=Change, summary="Delete a connection",
                responses={404: {"description": "no such connection"}})
def delete_connection(conn_id: str, request: Request) -> dict[str, Any]:
    events = manage.delete_connection(_read(request), conn_id, by=requester(request), at=time.time())
    if not events:
        raise HTTPException(status_code=404, detail=f"no connection {conn_id}")
    return _append(request, conn_id, events)
