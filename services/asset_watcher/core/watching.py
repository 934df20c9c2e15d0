"""What the asset watcher makes of records (pure): the watched topics from the DAG definitions, and each
accepted record as one asset event per asset watching its topic.

An event's id is the record's place, ``watch/<topic>/<partition>/<offset>/<uri>``: the same record always
makes the same event, so even a record read twice would be one event in the asset's ledger (its
transaction with the consumed offset makes sure it is read once).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from schemas import AssetEventRecorded, DagDefinition


class Message(Protocol):
    """A record of a watched topic, as the shell read it (infra.log.Message)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> float: ...


VALUE_KEPT = 64 * 1024  # bytes of a record's key and value an event carries in its extra


@dataclass(frozen=True, slots=True)
class Watched:
    """An asset watching a topic through one of its watchers."""

    uri: str
    name: str
    group: str
    watcher: str
    apply_function: str = ""


WatchTable = dict[str, tuple[Watched, ...]]  # topic -> the assets watching it
Accepts = Callable[[Watched, Message], tuple[bool, Any]]  # (an event?, its payload)


def watch_table(definitions: Iterable[DagDefinition]) -> WatchTable:
    """The topics the DAGs' schedules watch, each with its assets (the same asset and watcher in several
    DAGs: once)."""
    found: dict[str, dict[tuple[str, str], Watched]] = {}
    for definition in definitions:
        for asset in definition.schedule_assets:
            for watcher in asset.watchers:
                for topic in watcher.topics:
                    found.setdefault(topic, {})[(asset.uri, watcher.name)] = Watched(
                        asset.uri, asset.name or asset.uri, asset.group, watcher.name, watcher.apply_function)
    return {topic: tuple(sorted(watched.values(), key=lambda item: (item.uri, item.watcher)))
            for topic, watched in sorted(found.items())}


def asset_events(table: WatchTable, messages: Iterable[Message], accepts: Accepts,
                 now: float) -> list[AssetEventRecorded]:
    """One event per asset watching each message's topic that accepts it (an asset watching one topic
    through two watchers: one event, if either accepts)."""
    events: list[AssetEventRecorded] = []
    for message in messages:
        done: set[str] = set()
        for watched in table.get(message.topic, ()):
            if watched.uri in done:
                continue
            accepted, payload = accepts(watched, message)
            if not accepted:
                continue
            done.add(watched.uri)
            events.append(AssetEventRecorded(
                uri=watched.uri, name=watched.name, group=watched.group,
                extra_json=json.dumps(record_extra(message, watched.watcher, payload), sort_keys=True),
                event_id=event_id(message, watched.uri), timestamp=message.timestamp, at=now))
    return events


def event_id(message: Message, uri: str) -> str:
    return f"watch/{message.topic}/{message.partition}/{message.offset}/{uri}"


def record_extra(message: Message, watcher: str, payload: Any = None) -> dict[str, Any]:
    """What the event says of its record: where it is, its key and value (text, or base64 when they are
    not UTF-8; at most 64 KiB each), and the apply function's payload when it returned one."""
    extra: dict[str, Any] = {"watcher": watcher, "topic": message.topic, "partition": message.partition,
                             "offset": message.offset, "timestamp": message.timestamp}
    for name, data in (("key", message.key), ("value", message.value)):
        if data is None:
            extra[name] = None
            continue
        if len(data) > VALUE_KEPT:
            extra[f"{name}_truncated"] = len(data)
            data = data[:VALUE_KEPT]
        try:
            extra[name] = data.decode()
        except UnicodeDecodeError:
            extra[f"{name}_base64"] = base64.b64encode(data).decode("ascii")
    if payload is not None and payload is not True:
        try:  # as the event will write it (sorted keys: a dict of mixed key types cannot be), and not too big
            text = json.dumps(payload, sort_keys=True)
            extra["payload"] = payload if len(text) <= VALUE_KEPT else repr(payload)[:1000]
        except Exception:  # noqa: BLE001 - anything a user's function returned: kept as its repr
            extra["payload"] = repr(payload)[:1000]
    return extra
