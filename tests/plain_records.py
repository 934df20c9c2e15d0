"""An event as a general Avro reader returns it: nested records as dicts of their fields."""

from __future__ import annotations

import dataclasses
from typing import Any


def plain(value: Any) -> Any:
    """``value`` (an event, a nested record, a list or dict of them) as plain dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value
