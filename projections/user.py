"""Read model ``tock_user``: accounts (user name, role, password hash), from ``tock.users``.

A deleted account's row is removed; created again, it starts afresh.
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
            created_at = row["created_at"] if row is not None else event.at
            return {"username": event.username, "role": event.role, "password_hash": event.password_hash,
                    "created_by": event.created_by, "created_at": created_at, "updated_at": event.at}
        case UserDeleted():
            return None
    raise TypeError(f"tock_user read model cannot apply {type(event).__name__}")
