"""Assets (Airflow 3's ``airflow.sdk`` names): ``Asset``, ``AssetAlias``, ``AssetAll`` / ``AssetAny`` (``&`` and
``|``), the ``outlet_events`` a running try adds extra and alias events to, and the ``triggering_asset_events``
of an asset-triggered run.

A task that names ``outlets=[Asset(...)]`` updates them when a try of it succeeds: the events travel in the
same record as the success (schemas/assets.py), so a success never lacks its events and an event never
belongs to a try that did not succeed. A DAG with ``schedule=[asset, ...]`` (all of them) or a condition
(``a & (b | c)``) gets one run each time the condition is met by events since its last asset-triggered run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from schemas.assets import EXTRA_MOST_BYTES, URI_MOST, asset_problem
from schemas.dags import AssetDefinition
from tock.watchers import AssetWatcher


class BaseAsset:
    """What a schedule may be made of: an asset, an alias, or a condition of them (``&``, ``|``)."""

    def __and__(self, other: BaseAsset) -> AssetAll:
        _operand(other, "&")
        return AssetAll(self, other)

    def __or__(self, other: BaseAsset) -> AssetAny:
        _operand(other, "|")
        return AssetAny(self, other)

    def condition(self) -> dict[str, Any]:
        """The condition as the scheduler reads it (schemas/dags.py ``asset_condition_json``)."""
        raise NotImplementedError

    def iter_assets(self) -> Iterator[Asset]:
        """Every asset the condition names, in order, each once."""
        raise NotImplementedError


def _operand(other: Any, operator: str) -> None:
    if not isinstance(other, BaseAsset):
        raise TypeError(f"an asset condition combines assets, aliases and conditions with {operator!r}, "
                        f"not {other!r}")


class Asset(BaseAsset):
    """``Asset(name=None, uri=None, *, group="asset", extra=None, watchers=None)``: a piece of data tasks
    update and DAGs are scheduled on. Given only one of name and uri, it is both (Airflow's rule); the uri
    identifies the asset. ``extra``: the asset's own metadata (JSON). ``watchers``: ``AssetWatcher``s whose
    records are events of the asset (tock/watchers.py)."""

    def __init__(self, name: str | None = None, uri: str | None = None, *, group: str = "asset",
                 extra: dict[str, Any] | None = None, watchers: Iterable[Any] | None = None) -> None:
        if name is None and uri is None:
            raise TypeError("Asset() needs a name or a uri (or both)")
        self.name = _text(name if name is not None else uri, "name")
        self.uri = _text(uri if uri is not None else name, "uri")
        problem = asset_problem(self.uri)
        if problem:
            raise ValueError(problem)
        self.group = _text(group, "group")
        self.extra = _json_object(extra, f"Asset {self.uri!r}: extra")
        self.watchers = _watchers(watchers, self.uri)

    def condition(self) -> dict[str, Any]:
        return {"asset": self.uri}

    def iter_assets(self) -> Iterator[Asset]:
        yield self

    def definition(self) -> AssetDefinition:
        return AssetDefinition(uri=self.uri, name=self.name, group=self.group,
                               extra_json=json.dumps(self.extra, sort_keys=True),
                               watchers=[watcher.definition() for watcher in self.watchers])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Asset) and (self.uri, self.name) == (other.uri, other.name)

    def __hash__(self) -> int:
        return hash(("asset", self.uri))

    def __repr__(self) -> str:
        return f"Asset(name={self.name!r}, uri={self.uri!r})" if self.name != self.uri else f"Asset({self.uri!r})"


def _watchers(given: Iterable[Any] | None, uri: str) -> list[AssetWatcher]:
    watchers = list(given or ())
    for watcher in watchers:
        if not isinstance(watcher, AssetWatcher):
            raise TypeError(f"Asset {uri!r}: watchers must be AssetWatchers, got {watcher!r}")
    names = [watcher.name for watcher in watchers]
    if len(set(names)) != len(names):
        raise ValueError(f"Asset {uri!r}: two watchers are named alike: {names}")
    return watchers


class AssetAlias(BaseAsset):
    """``AssetAlias(name, group="asset")``: a name a task adds events of assets through at run time
    (``outlet_events[AssetAlias("x")].add(Asset("y"))``); a DAG scheduled on the alias runs on them."""

    def __init__(self, name: str, group: str = "asset") -> None:
        self.name = _text(name, "name")
        self.group = _text(group, "group")

    def condition(self) -> dict[str, Any]:
        return {"alias": self.name}

    def iter_assets(self) -> Iterator[Asset]:
        return iter(())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssetAlias) and self.name == other.name

    def __hash__(self) -> int:
        return hash(("alias", self.name))

    def __repr__(self) -> str:
        return f"AssetAlias({self.name!r})"


class _Condition(BaseAsset):
    kind = ""
    objects: tuple[BaseAsset, ...]

    def __init__(self, *objects: BaseAsset) -> None:
        if not objects:
            raise TypeError(f"{type(self).__name__}() needs at least one asset")
        for item in objects:
            _operand(item, "&" if self.kind == "all" else "|")
        # a & b & c is one AssetAll of three (as Airflow flattens it)
        self.objects = tuple(part for item in objects
                             for part in (item.objects if isinstance(item, _Condition) and item.kind == self.kind
                                          else (item,)))

    def condition(self) -> dict[str, Any]:
        return {self.kind: [item.condition() for item in self.objects]}

    def iter_assets(self) -> Iterator[Asset]:
        seen: set[str] = set()
        for item in self.objects:
            for asset in item.iter_assets():
                if asset.uri not in seen:
                    seen.add(asset.uri)
                    yield asset

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.objects))})"


class AssetAll(_Condition):
    """Met when each of its parts is (``a & b``; a schedule given as a list is this)."""

    kind = "all"


class AssetAny(_Condition):
    """Met when one of its parts is (``a | b``)."""

    kind = "any"


def schedule_condition(schedule: Any) -> BaseAsset | None:
    """The asset condition a DAG's ``schedule`` names (a list of assets is all of them), or None when it is
    not an asset schedule. TypeError for a list that holds anything but assets."""
    if isinstance(schedule, list | tuple) and schedule:
        if not all(isinstance(item, BaseAsset) for item in schedule):
            raise TypeError(f"a schedule given as a list is a list of assets, got {schedule!r:.200}")
        schedule = schedule[0] if len(schedule) == 1 else AssetAll(*schedule)
    if not isinstance(schedule, BaseAsset):
        return None
    if _names_alias(schedule):
        raise ValueError(f"schedule {schedule!r}: scheduling on an AssetAlias is not offered yet; schedule on the "
                         "assets it adds events to (a task may still name an alias in its outlets)")
    return schedule


def _names_alias(condition: BaseAsset) -> bool:
    if isinstance(condition, AssetAlias):
        return True
    return isinstance(condition, _Condition) and any(_names_alias(item) for item in condition.objects)


def outlets_of(outlets: Any, task_id: str) -> tuple[list[Asset], list[AssetAlias]]:
    """A task's ``outlets`` as its assets and its aliases (ValueError naming the task for anything else)."""
    if outlets is None:
        return [], []
    items = [outlets] if isinstance(outlets, BaseAsset) else outlets
    if not isinstance(items, list | tuple):
        raise ValueError(f"task {task_id!r}: outlets must be a list of Asset or AssetAlias, got {outlets!r:.200}")
    assets, aliases = [], []
    for item in items:
        if isinstance(item, Asset):
            assets.append(item)
        elif isinstance(item, AssetAlias):
            aliases.append(item)
        else:
            raise ValueError(f"task {task_id!r}: outlets must be Asset or AssetAlias objects, got {item!r:.200}")
    return assets, aliases


# -- at run time ---------------------------------------------------------------------------------

@dataclass
class OutletEvent:
    """What a running try says about one of its outlets (Airflow's ``OutletEventAccessor``): ``extra`` goes
    with the asset's event; for an alias, ``add(asset, extra)`` adds an event of ``asset`` through it."""

    key: BaseAsset
    extra: dict[str, Any] = field(default_factory=dict)
    added: list[tuple[Asset, dict[str, Any]]] = field(default_factory=list)

    def add(self, asset: Asset, extra: dict[str, Any] | None = None) -> None:
        if not isinstance(self.key, AssetAlias):
            raise TypeError(f"add() adds events through an asset alias; {self.key!r} is not one")
        if not isinstance(asset, Asset):
            raise TypeError(f"an alias adds events of an Asset, got {asset!r:.200}")
        self.added.append((asset, _json_object(extra, f"the event of {asset.uri!r} through {self.key!r}: extra")))


class OutletEventAccessors(Mapping[BaseAsset, OutletEvent]):
    """The context's ``outlet_events``: ``outlet_events[Asset("s3://x")].extra = {...}``. Only the task's own
    outlets (assets and aliases) may be named: a mistake is a KeyError saying which are."""

    def __init__(self, assets: Iterable[Asset], aliases: Iterable[AssetAlias]) -> None:
        self._events: dict[BaseAsset, OutletEvent] = {key: OutletEvent(key) for key in [*assets, *aliases]}

    def __getitem__(self, key: BaseAsset | str) -> OutletEvent:
        found = self._find(key)
        if found is None:
            names = ", ".join(map(repr, self._events)) or "none"
            raise KeyError(f"{key!r} is not one of the task's outlets (they are: {names})")
        return found

    def _find(self, key: Any) -> OutletEvent | None:
        if isinstance(key, BaseAsset):
            return self._events.get(key) or next((event for asset, event in self._events.items()
                                                  if isinstance(asset, Asset) and isinstance(key, Asset)
                                                  and asset.uri == key.uri), None)
        return next((event for asset, event in self._events.items()
                     if isinstance(asset, Asset) and key in (asset.uri, asset.name)
                     or isinstance(asset, AssetAlias) and key == asset.name), None)

    def __iter__(self) -> Iterator[BaseAsset]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def events_json(self) -> str:
        """The try's asset events, as its success carries them (TaskSucceeded.asset_events_json): one per
        outlet asset, with its extra, and one per event added through an alias."""
        events = [_event_item(key, event.extra, "") for key, event in self._events.items() if isinstance(key, Asset)]
        for key, event in self._events.items():
            if isinstance(key, AssetAlias):
                events += [_event_item(asset, extra, key.name) for asset, extra in event.added]
        for item in events:
            what = f"outlet_events[{item['uri']!r}].extra"
            size = len(json.dumps(_json_object(item["extra"], what)).encode())
            if size > EXTRA_MOST_BYTES:
                raise ValueError(f"{what} is {size} bytes as JSON; an asset event's extra is at most "
                                 f"{EXTRA_MOST_BYTES}")
        return json.dumps(events, sort_keys=True) if events else ""


def _event_item(asset: Asset, extra: dict[str, Any], alias: str) -> dict[str, Any]:
    return {"uri": asset.uri, "name": asset.name, "group": asset.group, "extra": extra, "alias": alias}


@dataclass(frozen=True)
class AssetEvent:
    """One event that triggered the run (Airflow's ``AssetEvent``): the asset, its extra, the try (or
    nothing, for one appended through the API) that produced it, and when."""

    asset: Asset
    extra: dict[str, Any]
    source_dag_id: str | None
    source_run_id: str | None
    source_task_id: str | None
    source_map_index: int
    source_alias_name: str | None
    timestamp: datetime

    @property
    def uri(self) -> str:
        return self.asset.uri


class TriggeringAssetEvents(Mapping[str, list[AssetEvent]]):
    """The context's ``triggering_asset_events``: the events that created an asset-triggered run, by asset
    (an ``Asset``, its uri or its name), oldest first. Empty for any other run; an asset with no event in
    it gives [] (as Airflow 2's mapping did), so a consumer's manual run reads no events."""

    def __init__(self, events_json: str) -> None:
        self._by_uri: dict[str, list[AssetEvent]] = {}
        for item in json.loads(events_json) if events_json else []:
            event = asset_event_of(item)
            self._by_uri.setdefault(event.uri, []).append(event)

    def _uri(self, key: Any) -> str:
        if isinstance(key, Asset):
            return key.uri
        if key in self._by_uri:
            return str(key)
        return next((uri for uri, events in self._by_uri.items() if events[0].asset.name == key), str(key))

    def __getitem__(self, key: Any) -> list[AssetEvent]:
        """The events of ``key`` that triggered the run, oldest first; [] for an asset none of whose events
        did (a manual run of the consumer, say)."""
        return list(self._by_uri.get(self._uri(key), []))

    def __contains__(self, key: object) -> bool:
        return self._uri(key) in self._by_uri

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_uri)

    def __len__(self) -> int:
        return len(self._by_uri)


def asset_event_of(item: dict[str, Any]) -> AssetEvent:
    """An event as a run or a try carries it (JSON with the fields of schemas/assets.py's records)."""
    asset = Asset(name=item.get("name") or item["uri"], uri=item["uri"], group=item.get("group") or "asset")
    return AssetEvent(asset=asset, extra=json.loads(item.get("extra_json") or "{}"),
                      source_dag_id=item.get("source_dag_id") or None, source_run_id=item.get("source_run_id") or None,
                      source_task_id=item.get("source_task_id") or None,
                      source_map_index=int(item.get("source_map_index", -1)),
                      source_alias_name=item.get("source_alias") or None,
                      timestamp=datetime.fromtimestamp(float(item.get("timestamp", 0.0)), UTC))


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > URI_MOST:
        raise ValueError(f"an asset's {what} is a non-empty string of at most {URI_MOST} characters, got {value!r:.80}")
    return value


def _json_object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict, got {value!r:.200}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} must be JSON (strings, numbers, booleans, None, lists, dicts): {error}") from None
    return value
