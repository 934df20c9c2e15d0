"""Read models ``asset`` and ``asset_event`` (one joint model: see projections/view.py): Airflow's asset list
and asset events, from the assets' ledgers in ``tock.events`` (schemas/assets.py) and the DAGs' definitions
in ``tock.dags``.

``asset``: one row per uri that a definition names (a task's outlet, an asset its schedule names) or an
event updates, before any event as in Airflow's list. ``references_json`` keeps, per DAG, what its latest
definition naming the asset said: the tasks updating it, its name, group and extra, and the definition's
fingerprint. A definition that no longer names the asset does not touch its row, so its entry stays:
readers keep the entries whose fingerprint is their DAG's current one (projections/queries.py). The
asset's name, group and extra are those of the definition parsed last; with none, its latest event's
name and group. ``consuming_dags_json``: the DAGs registered with it (AssetConsumerRegistered / Dropped).
``event_count`` and ``last_event_at`` count each event once.

``asset_event``: one row per (uri, event_id), the identity of an event in its asset's ledger: an event
appended again (an API request repeated) is the same row and counts once. ``consumed_by_json``: the runs
whose DagRunCreated names it in ``asset_events_json``. Runs and events are on different partitions, so a
run read first makes the row from what it names, and the event's record fills it in.

Each column comes from one partition's order, or is a set or a maximum merged from several, so any
interleaving of partitions gives the same rows. Not folded (``NOT_FOLDED``): the marks of the hops the
scheduler made (TaskAssetEventsRecorded, AssetEventForwarded, DagAssetsRegistered, AssetReaderCaughtUp),
AssetEventQueued (a DAG's queue is the scheduler's to keep; the run that consumed an event names it), and
its readers' hops (AssetReaderRegistered / Dropped, InletEventDelivered: what a try read is in its TaskQueued).
"""

from __future__ import annotations

import json
import math
from typing import Any

from projections.records import Record, Row, as_json
from schemas import (
    AssetConsumerDropped,
    AssetConsumerRegistered,
    AssetDefinition,
    AssetEventForwarded,
    AssetEventQueued,
    AssetEventRecorded,
    AssetReaderCaughtUp,
    AssetReaderDropped,
    AssetReaderRegistered,
    DagAssetsRegistered,
    DagParsed,
    DagRunCreated,
    InletEventDelivered,
    TaskAssetEventsRecorded,
)

ASSET, EVENT = "asset", "asset_event"
TABLES = (ASSET, EVENT)
FOLDED = (DagParsed, AssetEventRecorded, AssetConsumerRegistered, AssetConsumerDropped, DagRunCreated)
NOT_FOLDED = (TaskAssetEventsRecorded, AssetEventForwarded, DagAssetsRegistered, AssetEventQueued,
              AssetReaderRegistered, AssetReaderDropped, AssetReaderCaughtUp, InletEventDelivered)
NO_REFERENCES = "{}"  # references_json of an asset no definition has named (as_json of an empty object)

Slot = tuple[str, tuple[Any, ...]]  # (table, primary key)
Rows = dict[Slot, Row | None]


def empty_asset(uri: str) -> Row:
    return {"uri": uri, "name": "", "group": "asset", "extra_json": "{}", "references_json": NO_REFERENCES,
            "consuming_dags_json": "[]", "event_count": 0, "last_event_at": None, "updated_at": None}


def empty_event(uri: str, event_id: str) -> Row:
    return {"uri": uri, "event_id": event_id, "name": "", "group": "asset", "extra_json": "{}",
            "source_dag_id": "", "source_run_id": "", "source_task_id": "", "source_map_index": -1,
            "source_alias": "", "requested_by": None, "timestamp": None, "recorded_at": None,
            "consumed_by_json": "[]"}


def slots_of(record: Record) -> list[Slot] | None:
    """The rows the record changes (None: not an event of these tables). Never raises: the writer asks it
    for a whole batch before folding any record."""
    match record.event:
        case DagParsed() as event:
            return [(ASSET, (uri,)) for uri in references(event)]
        case AssetEventRecorded() as event:
            return [(ASSET, (event.uri,)), (EVENT, (event.uri, event.event_id))]
        case AssetConsumerRegistered() | AssetConsumerDropped() as event:
            return [(ASSET, (event.uri,))]
        case DagRunCreated() as event:
            return [(EVENT, (item["uri"], item["event_id"])) for item in triggering(event)]
    return None


def evolve_rows(rows: Rows, record: Record) -> Rows:
    """The next value of each row in ``rows`` (those :func:`slots_of` named) that the record changes."""
    match record.event:
        case DagParsed() as event:
            return _parsed(rows, event)
        case AssetEventRecorded() as event:
            return _recorded(rows, event)
        case AssetConsumerRegistered() as event:
            return _consumers(rows, event, add=True)
        case AssetConsumerDropped() as event:
            return _consumers(rows, event, add=False)
        case DagRunCreated() as event:
            return _consumed(rows, event)
    raise TypeError(f"asset read model cannot apply {type(record.event).__name__}")


# -- definitions -------------------------------------------------------------------------------------------

def references(event: DagParsed) -> dict[str, Row]:
    """Per uri the definition names: what it says of the asset, and its tasks that update it."""
    found: dict[str, Row] = {}
    for asset in event.definition.schedule_assets:
        found.setdefault(asset.uri, _reference(event, asset))
    for task in event.definition.tasks:
        for asset in task.outlets:
            tasks = found.setdefault(asset.uri, _reference(event, asset))["tasks"]
            if task.task_id not in tasks:
                tasks.append(task.task_id)
    return found


def _reference(event: DagParsed, asset: AssetDefinition) -> Row:
    return {"fingerprint": event.fingerprint, "at": event.at, "tasks": [], "name": asset.name,
            "group": asset.group, "extra_json": asset.extra_json}


def _parsed(rows: Rows, event: DagParsed) -> Rows:
    changed: Rows = {}
    for uri, reference in references(event).items():
        slot: Slot = (ASSET, (uri,))
        row = rows.get(slot) or empty_asset(uri)
        by_dag = {**json.loads(row["references_json"]), event.dag_id: {**reference,
                                                                        "tasks": sorted(reference["tasks"])}}
        changed[slot] = {**row, **_described(by_dag), "references_json": as_json(by_dag),
                         "updated_at": _latest(row["updated_at"], event.at)}
    return changed


def _described(by_dag: dict[str, Row]) -> Row:
    """Name, group and extra of the definition parsed last (ties: the greatest DAG id), whatever the order
    the DAGs' partitions were read in."""
    _dag_id, newest = max(by_dag.items(), key=lambda item: (item[1]["at"], item[0]))
    return {"name": newest["name"], "group": newest["group"], "extra_json": newest["extra_json"]}


# -- the asset's ledger -------------------------------------------------------------------------------------

def _recorded(rows: Rows, event: AssetEventRecorded) -> Rows:
    asset_slot: Slot = (ASSET, (event.uri,))
    event_slot: Slot = (EVENT, (event.uri, event.event_id))
    stored = rows.get(event_slot)
    if stored is not None and stored["recorded_at"] is not None:
        return {}  # appended again (a request repeated, a delivery retried): the first one stands
    asset = rows.get(asset_slot) or empty_asset(event.uri)
    return {asset_slot: _counted(asset, event),
            event_slot: _event_row(stored or empty_event(event.uri, event.event_id), event)}


def _counted(asset: Row, event: AssetEventRecorded) -> Row:
    described: Row = {}
    if asset["references_json"] == NO_REFERENCES:  # no definition says what it is: its events do
        described = {"name": event.name or asset["name"], "group": event.group or asset["group"]}
    return {**asset, **described, "event_count": asset["event_count"] + 1,
            "last_event_at": _latest(asset["last_event_at"], event.timestamp),
            "updated_at": _latest(asset["updated_at"], event.at)}


def _event_row(row: Row, event: AssetEventRecorded) -> Row:
    return {**row, "name": event.name, "group": event.group, "extra_json": event.extra_json,
            "source_dag_id": event.source_dag_id, "source_run_id": event.source_run_id,
            "source_task_id": event.source_task_id, "source_map_index": event.source_map_index,
            "source_alias": event.source_alias, "requested_by": event.requested_by,
            "timestamp": event.timestamp, "recorded_at": event.at}


def _consumers(rows: Rows, event: AssetConsumerRegistered | AssetConsumerDropped, *, add: bool) -> Rows:
    slot: Slot = (ASSET, (event.uri,))
    row = rows.get(slot) or empty_asset(event.uri)
    consumers = set(json.loads(row["consuming_dags_json"]))
    if add:
        consumers.add(event.dag_id)
    else:
        consumers.discard(event.dag_id)
    return {slot: {**row, "consuming_dags_json": as_json(sorted(consumers)),
                   "updated_at": _latest(row["updated_at"], event.at)}}


# -- the runs that consumed events --------------------------------------------------------------------------

def triggering(event: DagRunCreated) -> list[Row]:
    """The events an asset-triggered run names, each an object with a uri and an event id (anything else
    in ``asset_events_json`` is passed over: a run's own record must not stop the projection)."""
    try:
        items = json.loads(event.asset_events_json) if event.asset_events_json else []
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)
            and isinstance(item.get("uri"), str) and isinstance(item.get("event_id"), str)]


def _consumed(rows: Rows, event: DagRunCreated) -> Rows:
    run = {"dag_id": event.dag_id, "run_id": event.run_id}
    changed: Rows = {}
    for item in triggering(event):
        slot: Slot = (EVENT, (item["uri"], item["event_id"]))
        row = changed.get(slot) or rows.get(slot) or _named_by_run(item)
        runs = json.loads(row["consumed_by_json"])
        if run not in runs:
            runs = sorted([*runs, run], key=lambda known: (known["dag_id"], known["run_id"]))
        changed[slot] = {**row, "consumed_by_json": as_json(runs)}
    return changed


def _named_by_run(item: dict[str, Any]) -> Row:
    """An event's row as a run that consumed it names it, until the event's own record is read."""
    row = empty_event(item["uri"], item["event_id"])
    texts = {name: item[name] for name in ("name", "group", "extra_json", "source_dag_id", "source_run_id",
                                           "source_task_id", "source_alias") if isinstance(item.get(name), str)}
    map_index = _number(item.get("source_map_index"))
    if map_index is None or not -1 <= map_index < 2**31:  # an INTEGER column: a map index, or -1
        map_index = -1
    return {**row, **texts, "source_map_index": int(map_index), "timestamp": _number(item.get("timestamp")) or 0.0}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _latest(known: float | None, at: float) -> float:
    return at if known is None else max(known, at)
