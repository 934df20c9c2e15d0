"""Read model ``tock_user``: accounts (user name, role, password hash), from ``tock.users``.

A deleted account's row is removed; created again, it starts afresh: a new incarnation, named by
the log position of the UserCreated that began it (``created_partition``, ``created_offset``).
A token is the account's only if it was created after that position (``queries.token_owner``), so
the tokens of a deleted account stay dead when its name is created again. A UserCreated for an
existing account (a new password or role) keeps the incarnation, and its tokens.
"""

from __future__ import annotations

from projections.records import Key, Record, Row
from schemas import UserCreated, UserDeleted

TABLE = "tock_user"  # "user" is a reserved word in PostgreSQL


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.username,) if isinstance(event, (UserCreated, UserDeleted)) else None


def evolve(row: Row | None, record: Record) -> Row | None:
    event = record.event
    match event:
        case UserCreated():
            if row is None:
                row = {"created_at": event.at, "created_partition": record.partition, "created_offset": record.offset}
            return {"username": event.username, "role": event.role, "password_hash": event.password_hash,
                    "created_by": event.created_by, "created_at": row["created_at"], "updated_at": event.at,
                    "created_partition": row["created_partition"], "created_offset": row["created_offset"]}
        case UserDeleted():
            return None
    raise TypeError(f"tock_user read model cannot apply {type(event).__name__}")
