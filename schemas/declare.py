"""How an event is declared: a frozen dataclass registered with its topic and schema version.

The dataclass is the one declaration. Its Avro schema is generated from it
(``schemas.avro``) and frozen under ``schemas/avro/<Name>/v<N>.avsc``; a test checks
the two agree, and every frozen version stays so old records decode forever.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar, dataclass_transform

T = TypeVar("T")
Declared = TypeVar("Declared")

# Logical topic names; the real name is ``<prefix>tock.<logical>``.
EVENTS = "events"
HEARTBEATS = "heartbeats"
DAGS = "dags"
PARSING = "parsing"
SCHEDULERS = "schedulers"
DEAD_LETTER = "dead-letter"
LOGS = "logs"  # task log lines (schemas/logs.py)
USERS = "users"  # accounts and API tokens (schemas/users.py)
SNAPSHOTS = "snapshots"  # scheduler partition snapshots (services/scheduler/core/snapshot.py), not events


class EventBase:
    """Base of every event declaration: its topic and the version of its current schema.

    The closed union of every event is ``schemas.Event`` (generated into schemas/union.py)."""

    __slots__ = ()
    TOPIC: ClassVar[str]
    VERSION: ClassVar[int]


EVENT_TYPES: dict[str, type[EventBase]] = {}


@dataclass_transform(frozen_default=True, kw_only_default=True)
def event(topic: str, version: int = 1) -> Callable[[type[Declared]], type[Declared]]:
    """Declare an event: a frozen, slotted, keyword-only dataclass written to ``topic``."""

    def register(cls: type[Declared]) -> type[Declared]:
        if not issubclass(cls, EventBase):
            raise TypeError(f"event {cls.__name__} must derive from EventBase")
        if cls.__name__ in EVENT_TYPES:
            raise TypeError(f"event {cls.__name__} declared twice")
        declared = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        declared.TOPIC = topic
        declared.VERSION = version
        EVENT_TYPES[declared.__name__] = declared
        return declared

    return register


@dataclass_transform(frozen_default=True, kw_only_default=True)
def record(cls: type[T]) -> type[T]:
    """Declare a value nested inside events (not an event itself)."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)
