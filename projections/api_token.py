"""Read model ``api_token``: API bearer tokens (SHA-256 of the secret, owner, revocation), from ``tock.users``.

A token is valid while its row is not revoked and its owner's account exists in the incarnation the
token was created in (the API joins ``tock_user`` on the name and requires the token's log position to
come after the account's UserCreated), so deleting a user ends its tokens without an event per token,
for good: creating the name again does not bring them back.
"""

from __future__ import annotations

from projections.records import Key, Record, Row
from schemas import TokenCreated, TokenRevoked

TABLE = "api_token"


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.token_id,) if isinstance(event, (TokenCreated, TokenRevoked)) else None


def evolve(row: Row | None, record: Record) -> Row | None:
    event = record.event
    match event:
        case TokenCreated():
            return {"token_id": event.token_id, "username": event.username, "token_hash": event.token_hash,
                    "description": event.description, "created_by": event.created_by, "created_at": event.at,
                    "revoked_at": None, "revoked_by": None, "created_partition": record.partition,
                    "created_offset": record.offset}
        case TokenRevoked():
            if row is None:  # revoking an unknown token changes nothing
                return None
            return {**row, "revoked_at": event.at, "revoked_by": event.revoked_by}
    raise TypeError(f"api_token read model cannot apply {type(event).__name__}")
