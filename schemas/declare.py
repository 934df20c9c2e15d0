"""How an event is declared: a frozen dataclass registered with its topic and schema version.

The dataclass is the one declaration. Its Avro schema is generated from it
(``schemas.avro``) and frozen under ``schemas/avro/<Name>/v<N>.avsc``; a test checks
the two agree, and every frozen version stays so old records decode forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar, dataclass_transform

from schemas.routing import Route

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
SECRETS = "secrets"  # variables and connections of Tock's own store, values encrypted (schemas/secrets.py)
SNAPSHOTS = "snapshots"  # scheduler partition snapshots (services/scheduler/core/snapshot.py), not events


class EventBase:
    """Base of every event declaration: its topic, the version of its current schema, and how it
    is routed (record key and partition key, see schemas/routing.py).

    The closed union of every event is ``schemas.Event`` (generated into schemas/union.py)."""

    __slots__ = ()
    TOPIC: ClassVar[str]
    VERSION: ClassVar[int]
    ROUTE: ClassVar[Route[Self]]


EVENT_TYPES: dict[str, type[EventBase]] = {}


@dataclass_transform(frozen_default=True, kw_only_default=True)
def event(topic: str, *, route: Route[Declared], version: int = 1) -> Callable[[type[Declared]], type[Declared]]:
    """Declare an event: a frozen, slotted, keyword-only dataclass written to ``topic``, keyed and
    partitioned by ``route`` (one of the rules of schemas/routing.py).

    mypy refuses a route whose fields the class lacks (the class does not match the rule's
    protocol); so does this, when the class is declared."""

    def register(cls: type[Declared]) -> type[Declared]:
        if not issubclass(cls, EventBase):
            raise TypeError(f"event {cls.__name__} must derive from EventBase")
        if cls.__name__ in EVENT_TYPES:
            raise TypeError(f"event {cls.__name__} declared twice")
        if not isinstance(route, Route):
            raise TypeError(f"event {cls.__name__}: route must be a rule of schemas/routing.py, not {route!r}")
        declared = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        missing = set(route.fields) - _field_names(declared)
        if missing:
            raise TypeError(f"event {cls.__name__} is routed by {route.name} but has no {', '.join(sorted(missing))}")
        declared.TOPIC = topic
        declared.VERSION = version
        declared.ROUTE = route
        EVENT_TYPES[declared.__name__] = declared
        return declared

    return register


def _field_names(cls: type[object]) -> set[str]:
    return {item.name for item in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


@dataclass_transform(frozen_default=True, kw_only_default=True)
def record(cls: type[T]) -> type[T]:
    """Declare a value nested inside events (not an event itself)."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)
