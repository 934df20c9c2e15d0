"""Who is asking, and may they: every API route depends on :func:`require` with a role.

A request authenticates with ``Authorization: Bearer <token>``: a user's API token (its role
is its owner's), or TOCK_API_TOKEN, which acts as an admin (for scripts and bootstrapping).
Who asked is kept in ``request.state.principal`` and written into the commands it appends.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from projections import queries
from services.api import accounts

SETTINGS_TOKEN_USER = "api-token"  # who TOCK_API_TOKEN is in the commands it appends
bearer_scheme = HTTPBearer(auto_error=False,
                           description="a user's API token (`tock tokens create`) or TOCK_API_TOKEN")


@dataclass(frozen=True, slots=True)
class Principal:
    username: str
    role: str


class Unauthenticated(HTTPException):
    def __init__(self, detail: str = "authentication required: send Authorization: Bearer <token>") -> None:
        super().__init__(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def bearer_principal(request: Request, token: str) -> Principal | None:
    """The principal a bearer token stands for, or None."""
    settings_token = request.app.state.settings.api_token
    if settings_token is not None and hmac.compare_digest(token.encode(), settings_token.encode()):
        return Principal(SETTINGS_TOKEN_USER, "admin")
    parts = accounts.split_token(token)
    if parts is None:
        return None
    row = queries.token_owner(request.app.state.engine, parts[0])
    if row is None or not accounts.secret_matches(row["token_hash"], parts[1]):
        return None
    return Principal(row["username"], row["role"])


def authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The request's principal (401 without valid credentials)."""
    if credentials is not None:
        principal = bearer_principal(request, credentials.credentials)
        if principal is None:
            raise Unauthenticated("invalid or revoked bearer token")
        return principal
    raise Unauthenticated()


def require(role: str):
    """A dependency admitting principals whose role allows ``role`` (401 anonymous, 403 too weak)."""

    def check(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> Principal:
        principal = authenticate(request, credentials)
        if not accounts.allows(principal.role, role):
            raise HTTPException(status_code=403, detail=f"{principal.username} is a {principal.role}; "
                                                        f"this needs the {role} role")
        request.state.principal = principal
        return principal

    check.__name__ = f"require_{role}"
    return check


def requester(request: Request, fallback: str = "api") -> str:
    """Who to name in a command's ``requested_by``."""
    principal = getattr(request.state, "principal", None)
    return principal.username if principal is not None else fallback


VIEWER, OPERATOR, ADMIN = require("viewer"), require("operator"), require("admin")
