"""Accounts and API tokens (topic ``tock.users``, keyed by user name).

Only hashes are written: a password's argon2 hash, an API token's SHA-256 (tokens are long
random secrets, so a fast hash is enough and lets the API look one up per request). The
topic keeps every change, so who created, deleted or revoked what is in the log.
"""

from __future__ import annotations

from schemas.declare import USERS, EventBase, event
from schemas.routing import BY_USER


@event(USERS, route=BY_USER)
class UserCreated(EventBase):
    """An account with ``role`` (viewer, operator or admin); again for an existing user replaces
    its role and password."""

    username: str
    role: str
    password_hash: str
    created_by: str = ""
    at: float


@event(USERS, route=BY_USER)
class UserDeleted(EventBase):
    """The account and every token of it stop working."""

    username: str
    deleted_by: str = ""
    at: float


@event(USERS, route=BY_USER)
class TokenCreated(EventBase):
    """An API bearer token of ``username``: ``tock_<token_id>_<secret>``, stored as SHA-256 of the secret."""

    token_id: str
    username: str
    token_hash: str
    description: str = ""
    created_by: str = ""
    at: float


@event(USERS, route=BY_USER)
class TokenRevoked(EventBase):
    """The token stops working."""

    token_id: str
    username: str
    revoked_by: str = ""
    at: float
