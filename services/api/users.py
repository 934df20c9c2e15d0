"""``/api/v1/users``: accounts, for admins. Changes are UserCreated / UserDeleted in ``tock.users``."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from projections import queries
from schemas import UserCreated, UserDeleted
from services.api import accounts
from services.api.auth import ADMIN, requester
from services.api.commands import NotAppended, engine_of, not_appended
from services.api.params import LIMIT, OFFSET

users = APIRouter(tags=["users"], dependencies=[Depends(ADMIN)],
                  responses={401: {"description": "missing or wrong bearer token"},
                             403: {"description": "the caller is not an admin"}})


class User(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str
    role: str
    created_by: str | None = None
    created_at: float | None = None
    updated_at: float | None = None


class UserPage(BaseModel):
    items: list[User]
    limit: int
    offset: int


class NewUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str = Field(pattern=accounts.USERNAME_PATTERN)
    role: Literal["viewer", "operator", "admin"]
    password: str = Field(min_length=8, max_length=1024)


class UserChange(BaseModel):
    username: str
    event: str


def _append(request: Request, event) -> None:
    try:
        request.app.state.command_log.append(event)
    except NotAppended as failure:
        raise not_appended(failure, "change", "read the accounts back (GET /api/v1/users) before trying "
                                              "again") from None


@users.get("/api/v1/users", response_model=UserPage, summary="List accounts")
def list_users(limit: int = LIMIT, offset: int = OFFSET,
               engine: Engine = Depends(engine_of)):
    return {"items": queries.users(engine, limit=limit, offset=offset), "limit": limit, "offset": offset}


@users.post("/api/v1/users", status_code=202, response_model=UserChange, summary="Create or replace an account")
def create_user(body: NewUser, request: Request):
    """Append UserCreated with the password's argon2 hash; usable once the projector has folded it."""
    _append(request, UserCreated(username=body.username, role=body.role,
                                 password_hash=accounts.hash_password(body.password),
                                 created_by=requester(request), at=time.time()))
    return {"username": body.username, "event": "UserCreated"}


@users.delete("/api/v1/users/{username}", status_code=202, response_model=UserChange, summary="Delete an account",
              responses={404: {"description": "no such account"}})
def delete_user(username: str, request: Request, engine: Engine = Depends(engine_of)):
    """Append UserDeleted: the account's sessions and tokens stop working once it is folded."""
    if queries.user(engine, username) is None:
        raise HTTPException(status_code=404, detail=f"no user {username}")
    _append(request, UserDeleted(username=username, deleted_by=requester(request), at=time.time()))
    return {"username": username, "event": "UserDeleted"}
