"""The context's ``inlet_events`` (Airflow's ``InletEventsAccessors``): the latest events of the assets a
task reads (its ``inlets``), as the try's TaskQueued carries them: decided with the try, in the log, so a
try run again reads what it read the first time, and no try asks a database for them.

``inlet_events[asset]`` (an inlet ``Asset``, its uri or name, or an index into ``inlets``) is a sequence of
``AssetEvent``, oldest first, of at most the latest ``INLET_EVENTS_KEPT`` events of the asset. As in
Airflow, ``after(t)`` / ``before(t)`` (inclusive), ``ascending(False)`` and ``limit(n)`` narrow it and
return it. An asset that is not one of the task's inlets is a KeyError naming them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, overload

from tock.assets import Asset, AssetAlias, AssetEvent, asset_event_of


class InletEventsAccessor(Sequence[AssetEvent]):
    """The events of one inlet asset, oldest first, narrowed by ``after``, ``before``, ``ascending``, ``limit``."""

    def __init__(self, events: list[AssetEvent]) -> None:
        self._all = sorted(events, key=lambda event: event.timestamp)
        self._after: datetime | None = None
        self._before: datetime | None = None
        self._ascending = True
        self._limit: int | None = None

    def after(self, after: str | datetime) -> InletEventsAccessor:
        self._after = _moment(after, "after")
        return self

    def before(self, before: str | datetime) -> InletEventsAccessor:
        self._before = _moment(before, "before")
        return self

    def ascending(self, ascending: bool = True) -> InletEventsAccessor:
        self._ascending = bool(ascending)
        return self

    def limit(self, limit: int) -> InletEventsAccessor:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit() takes a non-negative integer, got {limit!r}")
        self._limit = limit
        return self

    def _events(self) -> list[AssetEvent]:
        found = [event for event in self._all if (self._after is None or event.timestamp >= self._after)
                 and (self._before is None or event.timestamp <= self._before)]
        found = found if self._ascending else found[::-1]
        return found if self._limit is None else found[:self._limit]

    @overload
    def __getitem__(self, key: int) -> AssetEvent: ...

    @overload
    def __getitem__(self, key: slice) -> Sequence[AssetEvent]: ...

    def __getitem__(self, key: int | slice) -> AssetEvent | Sequence[AssetEvent]:
        return self._events()[key]

    def __iter__(self) -> Iterator[AssetEvent]:
        return iter(self._events())

    def __len__(self) -> int:
        return len(self._events())

    def __repr__(self) -> str:
        return f"InletEventsAccessor({self._events()!r})"


def _moment(value: str | datetime, what: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{what}() takes a datetime or an ISO 8601 string, got {value!r:.80}") from None
    if not isinstance(value, datetime):
        raise TypeError(f"{what}() takes a datetime or an ISO 8601 string, got {value!r:.80}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class InletEventsAccessors(Mapping[Any, InletEventsAccessor]):
    """``inlet_events``: by inlet (an ``Asset``, its uri or name, or its index in ``inlets``), its events."""

    def __init__(self, inlets: list[Any], events_json: str) -> None:
        self._inlets = inlets
        self._by_uri: dict[str, list[AssetEvent]] = {
            uri: [asset_event_of(item) for item in items]
            for uri, items in (json.loads(events_json) if events_json else {}).items()}

    def __getitem__(self, key: Any) -> InletEventsAccessor:
        inlet = self._inlet(key)
        return InletEventsAccessor(list(self._by_uri.get(inlet.uri, [])))

    def _inlet(self, key: Any) -> Asset:
        if isinstance(key, int) and not isinstance(key, bool):
            key = self._inlets[key]  # IndexError past them, as in Airflow
        if isinstance(key, AssetAlias):
            raise KeyError(f"{key!r}: Tock does not read an asset alias's events yet; name its assets in inlets")
        found = next((inlet for inlet in self._inlets if isinstance(inlet, Asset)
                      and (inlet == key or isinstance(key, str) and key in (inlet.uri, inlet.name)
                           or isinstance(key, Asset) and key.uri == inlet.uri)), None)
        if found is None:
            names = ", ".join(repr(inlet) for inlet in self._inlets) or "none"
            raise KeyError(f"{key!r} is not one of the task's inlets (they are: {names})")
        return found

    def __iter__(self) -> Iterator[Any]:
        return iter(self._inlets)

    def __len__(self) -> int:
        return len(self._inlets)
