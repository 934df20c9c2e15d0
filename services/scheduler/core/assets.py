"""Assets: a success's asset events carried to the DAGs scheduled on them (schemas/assets.py).

Three sides, each a fold of its own partitions and the decisions it writes from them, each hop a record
where it lands and a mark where it leaves, in one transaction:

- **The producer's DAG** keeps the asset events of each success it folded (``outbox``) until it has
  written them on their assets' partitions (``AssetEventRecorded`` + ``TaskAssetEventsRecorded``).
- **The asset's partition** keeps the DAGs that consume each asset and the events not handed on yet;
  it hands each event to every consumer (``AssetEventQueued`` + ``AssetEventForwarded``), once: an event
  recorded twice (an API request repeated) is handed on once.
- **The consumer's DAG** registers with the assets its schedule names (``AssetConsumerRegistered`` /
  ``AssetConsumerDropped`` + ``DagAssetsRegistered``), queues the events handed to it, and when its
  condition is met by the queued events creates one run that names the events it consumes; folding the
  run takes them out of the queue. So each satisfied condition makes exactly one run, whatever restarts.
- **A reader's DAG** (a task with ``inlets``) registers the same way as their reader (``AssetReaderRegistered``
  / ``AssetReaderDropped``). The asset's partition keeps each asset's latest events (``INLET_EVENTS_KEPT``):
  it hands those to a new reader (``InletEventDelivered`` + ``AssetReaderCaughtUp``), then each new event.
  The DAG keeps the latest of each asset it reads, and each try of a reading task carries them in its
  TaskQueued (``inlet_events_json``): what a try read is in the log with the try.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, MutableMapping
from functools import lru_cache
from typing import Any, TypeAlias

from schemas import (
    ASSET_TRIGGERED,
    INLET_EVENTS_KEPT,
    AssetConsumerDropped,
    AssetConsumerRegistered,
    AssetEventForwarded,
    AssetEventQueued,
    AssetEventRecorded,
    AssetReaderCaughtUp,
    AssetReaderDropped,
    AssetReaderRegistered,
    DagAssetsRegistered,
    DagRunCreated,
    InletEventDelivered,
    TaskAssetEventsRecorded,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskSucceeded,
)
from services.scheduler.core.model import (
    HANDED_KEPT,
    AssetLedger,
    AssetSides,
    OutboxKey,
    SchedulerState,
    logical_date_iso,
)
from services.scheduler.core.quarantine import Guard

AssetDecision: TypeAlias = (AssetEventRecorded | TaskAssetEventsRecorded | AssetEventQueued | AssetEventForwarded
                            | AssetConsumerRegistered | AssetConsumerDropped | DagAssetsRegistered
                            | AssetReaderRegistered | AssetReaderDropped | AssetReaderCaughtUp | InletEventDelivered)

# Bytes of inlet events one TaskQueued carries at most (of its INPUTS_LIMIT_BYTES): past them, older events
# are left out (the newest of each asset first).
INLET_EVENTS_MOST_BYTES = 4 * 1024 * 1024
AssetEvent: TypeAlias = AssetDecision


def asset_run_id(now: float) -> str:
    return f"{ASSET_TRIGGERED}__{logical_date_iso(now)}"


# -- the producer's side ---------------------------------------------------------------------------

def succeeded(sides: AssetSides, event: TaskSucceeded, task: TaskDefinition | None) -> None:
    """A try's success (the current try's, folded once) with asset events: they are due on their assets."""
    if event.asset_events_json:
        items = json.loads(event.asset_events_json)
    elif task is not None and task.outlets:
        items = [{"uri": asset.uri, "name": asset.name, "group": asset.group} for asset in task.outlets]
    else:
        return
    _due(sides, event, items)


def empty_succeeded(sides: AssetSides, event: TaskEmptySucceeded, task: TaskDefinition | None) -> None:
    """An empty task's success (decided here, no try ran): its outlets are updated, as Airflow's are."""
    if task is not None and task.outlets:
        _due(sides, event, [{"uri": asset.uri, "name": asset.name, "group": asset.group} for asset in task.outlets])


def _due(sides: AssetSides, event: TaskSucceeded | TaskEmptySucceeded, items: list[dict[str, Any]]) -> None:
    try_number = getattr(event, "try_number", 0)
    key: OutboxKey = (event.dag_id, event.run_id, event.task_id, event.map_index, try_number)
    prefix = "|".join((event.dag_id, event.run_id, event.task_id, str(event.map_index), str(try_number)))
    recorded, ids = [], set()
    for item in items:
        alias = str(item.get("alias") or "")
        event_id = f"{prefix}|{item['uri']}" + (f"|{alias}" if alias else "")
        while event_id in ids:  # the same asset added twice through one alias: two events
            event_id += "+"
        ids.add(event_id)
        recorded.append(AssetEventRecorded(
            uri=str(item["uri"]), name=str(item.get("name") or item["uri"]), group=str(item.get("group") or "asset"),
            extra_json=json.dumps(item.get("extra") or {}, sort_keys=True), event_id=event_id,
            source_dag_id=event.dag_id, source_run_id=event.run_id, source_task_id=event.task_id,
            source_map_index=event.map_index, source_try_number=try_number, source_alias=alias,
            timestamp=event.at, at=event.at))
    sides.outbox[key] = recorded


def recorded_by_task(sides: AssetSides, event: TaskAssetEventsRecorded) -> None:
    sides.outbox.pop((event.dag_id, event.run_id, event.task_id, event.map_index, event.try_number), None)


def decide_records(sides: AssetSides, now: float) -> list[AssetDecision]:
    decided: list[AssetDecision] = []
    for (dag_id, run_id, task_id, map_index, try_number), events in sides.outbox.items():
        decided += events
        decided.append(TaskAssetEventsRecorded(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index,
                                               try_number=try_number, event_ids=[item.event_id for item in events],
                                               at=now))
    return decided


# -- the asset's side ------------------------------------------------------------------------------

def recorded(sides: AssetSides, event: AssetEventRecorded) -> None:
    ledger = sides.ledger
    if event.event_id not in ledger.handed and event.event_id not in ledger.pending:
        ledger.pending[event.event_id] = event
        recent = ledger.recent.setdefault(event.uri, [])
        recent.append(event)
        del recent[:-INLET_EVENTS_KEPT]


def forwarded(sides: AssetSides, event: AssetEventForwarded) -> None:
    ledger = sides.ledger
    ledger.pending.pop(event.event_id, None)
    ledger.handed[event.event_id] = None
    while len(ledger.handed) > HANDED_KEPT:
        del ledger.handed[next(iter(ledger.handed))]


def consumer_registered(sides: AssetSides, event: AssetConsumerRegistered) -> None:
    sides.ledger.consumers.setdefault(event.uri, {})[event.dag_id] = None


def consumer_dropped(sides: AssetSides, event: AssetConsumerDropped) -> None:
    consumers = sides.ledger.consumers.get(event.uri)
    if consumers is not None:
        consumers.pop(event.dag_id, None)
        if not consumers:
            del sides.ledger.consumers[event.uri]


def reader_registered(sides: AssetSides, event: AssetReaderRegistered) -> None:
    sides.ledger.readers.setdefault(event.uri, {})[event.dag_id] = False


def reader_dropped(sides: AssetSides, event: AssetReaderDropped) -> None:
    readers = sides.ledger.readers.get(event.uri)
    if readers is not None:
        readers.pop(event.dag_id, None)
        if not readers:
            del sides.ledger.readers[event.uri]


def reader_caught_up(sides: AssetSides, event: AssetReaderCaughtUp) -> None:
    readers = sides.ledger.readers.get(event.uri, {})
    if event.dag_id in readers:
        readers[event.dag_id] = True


def decide_handing(sides: AssetSides, now: float) -> list[AssetDecision]:
    """A new reader's catching up, then each event not handed on yet, to every DAG consuming its asset now
    and every DAG reading it, in the order they were recorded."""
    ledger = sides.ledger
    decided: list[AssetDecision] = _catching_up(ledger, now)
    for event in ledger.pending.values():
        dag_ids = list(ledger.consumers.get(event.uri, {}))
        decided += [_queued(event, dag_id, now) for dag_id in dag_ids]
        decided += [_delivered(event, dag_id, now) for dag_id in ledger.readers.get(event.uri, {})]
        decided.append(AssetEventForwarded(uri=event.uri, event_id=event.event_id, dag_ids=dag_ids, at=now))
    return decided


def _catching_up(ledger: AssetLedger, now: float) -> list[AssetDecision]:
    """Each reader not caught up gets the asset's latest events handed on already (those still pending
    reach it with every reader), then its mark."""
    decided: list[AssetDecision] = []
    for uri, readers in ledger.readers.items():
        for dag_id in (dag_id for dag_id, caught_up in readers.items() if not caught_up):
            decided += [_delivered(event, dag_id, now) for event in ledger.recent.get(uri, ())
                        if event.event_id not in ledger.pending]
            decided.append(AssetReaderCaughtUp(uri=uri, dag_id=dag_id, at=now))
    return decided


# What an event handed to a consumer carries of its record, and what a run names of each event it consumes.
_HANDED = tuple(item.name for item in dataclasses.fields(AssetEventQueued) if item.name not in ("dag_id", "at"))


def _queued(event: AssetEventRecorded, dag_id: str, now: float) -> AssetEventQueued:
    return AssetEventQueued(dag_id=dag_id, **{name: getattr(event, name) for name in _HANDED}, at=now)


def _delivered(event: AssetEventRecorded, dag_id: str, now: float) -> InletEventDelivered:
    return InletEventDelivered(dag_id=dag_id, **{name: getattr(event, name) for name in _HANDED}, at=now)


# -- the consumer's side ---------------------------------------------------------------------------

def registered(sides: AssetSides, event: DagAssetsRegistered) -> None:
    if event.uris:
        sides.registered[event.dag_id] = tuple(event.uris)
    else:
        sides.registered.pop(event.dag_id, None)
        sides.queues.pop(event.dag_id, None)
    reading = tuple(event.inlet_uris)
    if reading:
        sides.reading[event.dag_id] = reading
    else:
        sides.reading.pop(event.dag_id, None)
    kept = {uri: events for uri, events in sides.inlet_events.pop(event.dag_id, {}).items() if uri in reading}
    if kept:
        sides.inlet_events[event.dag_id] = kept


def inlet_delivered(sides: AssetSides, event: InletEventDelivered) -> None:
    """An event of an asset the DAG reads: kept with the latest of that asset (at most INLET_EVENTS_KEPT,
    the oldest by timestamp dropped); one of an asset it no longer reads is not for it."""
    if event.uri not in sides.reading.get(event.dag_id, ()):
        return
    events = sides.inlet_events.setdefault(event.dag_id, {}).setdefault(event.uri, {})
    events[event.event_id] = event
    if len(events) > INLET_EVENTS_KEPT:
        del events[min(events.values(), key=_age).event_id]


def _age(event: InletEventDelivered) -> tuple[float, str]:
    return event.timestamp, event.event_id


def inlet_events_json(sides: AssetSides, dag_id: str, task: TaskDefinition) -> str:
    """What a try of ``task`` reads of its inlets (TaskQueued.inlet_events_json): each asset's latest events,
    oldest first, at most INLET_EVENTS_MOST_BYTES of them together (the newest kept); "" for no inlets."""
    if not task.inlets:
        return ""
    known, budget = sides.inlet_events.get(dag_id, {}), INLET_EVENTS_MOST_BYTES
    by_uri: dict[str, list[dict[str, Any]]] = {}
    for uri in dict.fromkeys(asset.uri for asset in task.inlets):
        items: list[dict[str, Any]] = []
        for event in sorted(known.get(uri, {}).values(), key=_age, reverse=True):
            item = {name: getattr(event, name) for name in _HANDED}
            budget -= len(event.extra_json) + 400  # the extra, and about what the other fields take
            if budget < 0:
                break
            items.append(item)
        by_uri[uri] = items[::-1]
    return json.dumps(by_uri, sort_keys=True)


def queued(sides: AssetSides, event: AssetEventQueued) -> None:
    """An event handed to a DAG: queued if the DAG is registered with its asset (else its schedule changed
    since, and the event is not for it)."""
    if event.uri in sides.registered.get(event.dag_id, ()):
        sides.queues.setdefault(event.dag_id, {})[event.event_id] = event


def run_created(sides: AssetSides, event: DagRunCreated) -> None:
    """An asset-triggered run consumes the events it names: out of its DAG's queue."""
    queue = sides.queues.get(event.dag_id)
    if queue is None or not event.asset_events_json:
        return
    for item in json.loads(event.asset_events_json):
        queue.pop(str(item.get("event_id")), None)
    if not queue:
        del sides.queues[event.dag_id]


def decide_registrations(state: SchedulerState, now: float) -> list[AssetDecision]:
    """A DAG whose schedule, or whose tasks' inlets, name other assets than it is registered with registers
    with the new ones and drops the old ones; a DAG that is gone drops them all."""
    sides, decided = state.assets, list[AssetDecision]()
    consuming = {dag_id: tuple(sorted({asset.uri for asset in entry.definition.schedule_assets}))
                 for dag_id, entry in state.dags.items() if entry.definition.asset_condition_json}
    reading = {dag_id: entry.inlet_uris for dag_id, entry in state.dags.items() if entry.inlet_uris}
    for dag_id in sorted({*consuming, *sides.registered, *reading, *sides.reading}):
        wanted, had = consuming.get(dag_id, ()), sides.registered.get(dag_id, ())
        reads, read = reading.get(dag_id, ()), sides.reading.get(dag_id, ())
        if wanted == had and reads == read:
            continue
        decided += [AssetConsumerRegistered(uri=uri, dag_id=dag_id, at=now) for uri in wanted if uri not in had]
        decided += [AssetConsumerDropped(uri=uri, dag_id=dag_id, at=now) for uri in had if uri not in wanted]
        decided += [AssetReaderRegistered(uri=uri, dag_id=dag_id, at=now) for uri in reads if uri not in read]
        decided += [AssetReaderDropped(uri=uri, dag_id=dag_id, at=now) for uri in read if uri not in reads]
        decided.append(DagAssetsRegistered(dag_id=dag_id, uris=list(wanted), inlet_uris=list(reads), at=now))
    return decided


def decide_asset_runs(state: SchedulerState, now: float, scheduler_id: str, active: MutableMapping[str, int],
                      guard: Guard) -> list[DagRunCreated]:
    """One run for each DAG whose asset condition the queued events meet (and that has room for a run),
    consuming every event queued for it (Airflow's rule: they all trigger it)."""
    from services.scheduler.core.runs import created_run

    decided = []
    for dag_id, queue in state.assets.queues.items():
        dag = state.dags.get(dag_id)
        if dag is None or dag_id in state.paused or guard.skips(dag_id) or not dag.definition.asset_condition_json:
            continue
        if active.get(dag_id, 0) >= dag.definition.max_active_runs:
            continue
        with guard.of(dag_id):
            if met(condition_of(dag.definition.asset_condition_json), {event.uri for event in queue.values()}):
                active[dag_id] = active.get(dag_id, 0) + 1
                run_id = _free_run_id(state, dag_id, now)
                decided.append(created_run(dag, run_id, now, ASSET_TRIGGERED, "{}", scheduler_id, now,
                                           triggering_json(queue.values())))
    return decided


def _free_run_id(state: SchedulerState, dag_id: str, now: float) -> str:
    run_id = asset_run_id(now)
    while (dag_id, run_id) in state.runs or (dag_id, run_id) in state.finished:
        now += 1e-6  # a run of this moment exists (a clock set back): the next microsecond
        run_id = asset_run_id(now)
    return run_id


def triggering_json(events: Iterable[AssetEventQueued]) -> str:
    """The events a run consumes, as its DagRunCreated names them (its tries' ``triggering_asset_events``)."""
    items = [{name: getattr(event, name) for name in _HANDED}
             for event in sorted(events, key=lambda item: item.timestamp)]
    return json.dumps(items, sort_keys=True)


@lru_cache(maxsize=1024)
def condition_of(condition_json: str) -> Any:
    return json.loads(condition_json)


def met(condition: Any, present: set[str]) -> bool:
    """Whether the assets with queued events (``present``) meet the condition (tock/assets.py's JSON)."""
    if "asset" in condition:
        return condition["asset"] in present
    if "all" in condition:
        return all(met(part, present) for part in condition["all"])
    if "any" in condition:
        return any(met(part, present) for part in condition["any"])
    return False


def decide_assets(state: SchedulerState, now: float) -> list[AssetDecision]:
    """Every side's hops due now: records of successes' events, registrations, events handed on."""
    return [*decide_records(state.assets, now), *decide_registrations(state, now),
            *decide_handing(state.assets, now)]


def fold(state: SchedulerState, event: AssetEvent) -> None:
    """One asset event, on whichever side it lands."""
    sides = state.assets
    match event:
        case AssetEventRecorded():
            recorded(sides, event)
        case TaskAssetEventsRecorded():
            recorded_by_task(sides, event)
        case AssetEventQueued():
            queued(sides, event)
        case AssetEventForwarded():
            forwarded(sides, event)
        case AssetConsumerRegistered():
            consumer_registered(sides, event)
        case AssetConsumerDropped():
            consumer_dropped(sides, event)
        case DagAssetsRegistered():
            registered(sides, event)
        case AssetReaderRegistered():
            reader_registered(sides, event)
        case AssetReaderDropped():
            reader_dropped(sides, event)
        case AssetReaderCaughtUp():
            reader_caught_up(sides, event)
        case InletEventDelivered():
            inlet_delivered(sides, event)
