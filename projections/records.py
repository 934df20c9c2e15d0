"""What the folds read: a log record, duck-typed so the pure core needs no Kafka import.

Anything with ``topic`` (real name), ``partition``, ``offset``, ``key``, ``event``
(None for a tombstone) and ``timestamp`` works; ``infra.log.LogRecord`` is one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Protocol

Row = dict[str, Any]
Key = tuple


class Record(Protocol):
    topic: str
    partition: int
    offset: int
    key: str | None
    event: Any | None
    timestamp: float


def logical_topic(real_topic: str) -> str:
    """``events`` for ``t1.tock.events``: the logical name after the last ``tock.``."""
    return real_topic[real_topic.rfind("tock.") + len("tock."):]


def as_json(value: Any) -> str:
    """A stable JSON text (sorted keys) so equal values give equal column text."""
    return _ENCODER.encode(value)


# What json.dumps(sort_keys=True, separators=(",", ":")) builds on every call, built once.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def payload_json(event: Any) -> str:
    """Every field of an event as JSON, for history views."""
    names = _field_names(type(event))
    if names is None:  # nested records need the recursive (slow) conversion
        return as_json(dataclasses.asdict(event))
    return as_json({name: getattr(event, name) for name in names})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    fields = dataclasses.fields(cls)
    flat = all(field.type in _FLAT_TYPES for field in fields)
    return tuple(field.name for field in fields) if flat else None


# Field annotations (strings, as the schemas use postponed annotations) of plain values.
_FLAT_TYPES = {"str", "int", "float", "bool", "str | None", "int | None", "float | None", "bool | None"}
