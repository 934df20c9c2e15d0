"""Inlet events in the scheduler's core (issue 24): given a DAG whose tasks read assets (``inlets``),
these decisions — the DAG registered as the assets' reader, the asset's latest events handed to a new
reader once, each new event to every reader, the DAG's side keeping the latest of each, and each try of a
reading task carrying them in its TaskQueued — and nothing a reader is handed ever triggers a run."""

from __future__ import annotations

import json
from typing import Any

from schemas import (
    INLET_EVENTS_KEPT,
    AssetConsumerRegistered,
    AssetEventForwarded,
    AssetEventQueued,
    AssetReaderCaughtUp,
    AssetReaderDropped,
    AssetReaderRegistered,
    DagAssetsRegistered,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    InletEventDelivered,
    TaskDefinition,
    TaskQueued,
)
from services.scheduler.core import SchedulerState, decide, fold
from tests.unit.scheduler_fixtures import POLICY
from tests.unit.test_assets_core import asset, of, recorded_event, restored, run


def reader(inlets: tuple[str, ...] = ("a", "b"), dag_id: str = "reader", schedule: tuple[str, ...] = ()) -> DagParsed:
    tasks = [TaskDefinition(task_id="read", kind="bash", command="true", inlets=[asset(uri) for uri in inlets]),
             TaskDefinition(task_id="plain", kind="bash", command="true")]
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=tasks,
                               asset_condition_json=json.dumps({"asset": schedule[0]}) if schedule else "",
                               schedule_assets=[asset(uri) for uri in schedule])
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{inlets}-{schedule}",
                     definition=definition, at=0.0)


def delivered(uri: str, event_id: str, at: float, dag_id: str = "reader", extra: dict[str, Any] | None = None
              ) -> InletEventDelivered:
    return InletEventDelivered(dag_id=dag_id, uri=uri, name=uri, event_id=event_id,
                               extra_json=json.dumps(extra or {"n": at}), source_dag_id="producer",
                               source_run_id="r1", source_task_id="make", timestamp=at, at=at)


def shape(events: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(type(event).__name__, getattr(event, "uri", None), getattr(event, "event_id", None)) for event in events]


def read_by(state: SchedulerState, dag_id: str = "reader") -> dict[str, list[str]]:
    return {uri: list(events) for uri, events in state.assets.inlet_events.get(dag_id, {}).items()}


# -- the reader's DAG registers ------------------------------------------------------------------------

def test_a_dag_whose_tasks_read_assets_registers_as_their_reader_and_drops_those_it_no_longer_reads():
    state = fold(SchedulerState(), [reader(("b", "a"))])
    decided = decide(state, 1.0, POLICY)
    assert shape(decided) == [("AssetReaderRegistered", "a", None), ("AssetReaderRegistered", "b", None),
                              ("DagAssetsRegistered", None, None)]
    assert (decided[-1].uris, decided[-1].inlet_uris) == ([], ["a", "b"])
    fold(state, decided)
    caught_up = decide(state, 2.0, POLICY)  # the assets' side (on this one partition here): nothing to hand yet
    assert shape(caught_up) == [("AssetReaderCaughtUp", "a", None), ("AssetReaderCaughtUp", "b", None)]
    fold(state, caught_up)
    assert decide(state, 2.5, POLICY) == []
    fold(state, [reader(("b",))])
    assert shape(decide(state, 3.0, POLICY)) == [("AssetReaderDropped", "a", None), ("DagAssetsRegistered", None, None)]


def test_a_dag_both_scheduled_on_an_asset_and_reading_it_is_its_consumer_and_its_reader():
    state = fold(SchedulerState(), [reader(("a",), schedule=("a",))])
    decided = decide(state, 1.0, POLICY)
    assert shape(decided) == [("AssetConsumerRegistered", "a", None), ("AssetReaderRegistered", "a", None),
                              ("DagAssetsRegistered", None, None)]
    assert (decided[-1].uris, decided[-1].inlet_uris) == (["a"], ["a"])


# -- the asset's side --------------------------------------------------------------------------------

def test_a_new_reader_gets_the_latest_events_handed_on_already_once_then_each_new_one():
    state = fold(SchedulerState(), [recorded_event(event_id="api/1", at=1.0), recorded_event(event_id="api/2", at=2.0)])
    fold(state, decide(state, 2.5, POLICY))  # handed to nobody: no consumer, no reader yet
    fold(state, [AssetReaderRegistered(uri="a", dag_id="reader", at=3.0), recorded_event(event_id="api/3", at=3.0)])
    decided = decide(state, 4.0, POLICY)
    assert shape(decided) == [("InletEventDelivered", "a", "api/1"), ("InletEventDelivered", "a", "api/2"),
                              ("AssetReaderCaughtUp", "a", None),
                              ("InletEventDelivered", "a", "api/3"), ("AssetEventForwarded", "a", "api/3")]
    assert {event.dag_id for event in of(InletEventDelivered, decided)} == {"reader"}
    fold(state, decided)
    assert decide(state, 5.0, POLICY) == []
    fold(state, [AssetConsumerRegistered(uri="a", dag_id="consumer", at=5.0), recorded_event(event_id="api/4", at=6.0)])
    assert shape(decide(state, 7.0, POLICY)) == [("AssetEventQueued", "a", "api/4"),
                                                 ("InletEventDelivered", "a", "api/4"),
                                                 ("AssetEventForwarded", "a", "api/4")]


def test_the_asset_side_keeps_only_its_latest_events_for_new_readers():
    events = [recorded_event(event_id=f"api/{n}", at=float(n)) for n in range(INLET_EVENTS_KEPT + 5)]
    state = fold(SchedulerState(), events)
    fold(state, decide(state, 100.0, POLICY))
    fold(state, [AssetReaderRegistered(uri="a", dag_id="reader", at=101.0)])
    handed = of(InletEventDelivered, decide(state, 102.0, POLICY))
    assert [event.event_id for event in handed] == [f"api/{n}" for n in range(5, INLET_EVENTS_KEPT + 5)]


def test_a_dropped_reader_is_handed_nothing_more():
    state = fold(SchedulerState(), [AssetReaderRegistered(uri="a", dag_id="reader", at=1.0)])
    fold(state, decide(state, 2.0, POLICY))
    fold(state, [AssetReaderDropped(uri="a", dag_id="reader", at=3.0), recorded_event(event_id="api/1", at=4.0)])
    assert shape(decide(state, 5.0, POLICY)) == [("AssetEventForwarded", "a", "api/1")]


def test_a_reader_caught_up_mark_for_a_reader_dropped_since_changes_nothing():
    state = fold(SchedulerState(), [AssetReaderRegistered(uri="a", dag_id="reader", at=1.0),
                                    AssetReaderDropped(uri="a", dag_id="reader", at=2.0),
                                    AssetReaderCaughtUp(uri="a", dag_id="reader", at=3.0)])
    assert state.assets.ledger.readers == {}


# -- the reader's side -------------------------------------------------------------------------------

def registered_reader(inlets: tuple[str, ...] = ("a", "b")) -> SchedulerState:
    state = fold(SchedulerState(), [reader(inlets)])
    return fold(state, decide(state, 1.0, POLICY))


def test_the_reader_keeps_the_latest_events_of_each_asset_it_reads_and_none_of_another():
    state = registered_reader()
    newest_first = [delivered("a", f"e{n}", at=float(100 - n)) for n in range(INLET_EVENTS_KEPT + 3)]
    fold(state, [*newest_first, delivered("b", "b1", at=5.0), delivered("z", "z1", at=5.0),
                 delivered("a", "e0", at=100.0)])  # the same event handed twice (a catch-up and a new one)
    kept = read_by(state)
    assert sorted(kept["a"]) == sorted(f"e{n}" for n in range(INLET_EVENTS_KEPT))
    assert kept["b"] == ["b1"] and "z" not in kept


def test_an_asset_the_dag_no_longer_reads_is_forgotten_with_its_events():
    state = registered_reader()
    fold(state, [delivered("a", "a1", 2.0), delivered("b", "b1", 2.0)])
    fold(state, [DagAssetsRegistered(dag_id="reader", uris=[], inlet_uris=["b"], at=3.0)])
    assert read_by(state) == {"b": ["b1"]}
    fold(state, [DagAssetsRegistered(dag_id="reader", uris=[], inlet_uris=[], at=4.0)])
    assert read_by(state) == {} and "reader" not in state.assets.reading


def test_a_try_of_a_reading_task_carries_its_inlets_latest_events_oldest_first_and_another_task_none():
    state = registered_reader()
    fold(state, [delivered("b", "b2", at=4.0, extra={"rows": 2}), delivered("b", "b1", at=3.0),
                 run("reader", "r1")])
    queued = {event.task_id: event for event in of(TaskQueued, decide(state, 5.0, POLICY))}
    carried = json.loads(queued["read"].inlet_events_json)
    assert list(carried) == ["a", "b"] and carried["a"] == []
    assert [(item["event_id"], json.loads(item["extra_json"])) for item in carried["b"]] == [
        ("b1", {"n": 3.0}), ("b2", {"rows": 2})]
    assert carried["b"][0]["source_task_id"] == "make" and carried["b"][0]["timestamp"] == 3.0
    assert queued["plain"].inlet_events_json == ""


def test_events_handed_to_a_reader_never_trigger_its_asset_schedule():
    state = fold(SchedulerState(), [reader(("a",), schedule=("a",))])
    fold(state, decide(state, 1.0, POLICY))
    fold(state, [delivered("a", "e1", 2.0), delivered("a", "e2", 3.0)])
    assert not of(DagRunCreated, decide(state, 4.0, POLICY))
    fold(state, [AssetEventQueued(dag_id="reader", uri="a", name="a", event_id="e3", timestamp=5.0, at=5.0)])
    assert of(DagRunCreated, decide(state, 6.0, POLICY))  # the consumer's queue is what triggers it


def test_the_reader_sides_survive_a_snapshot():
    state = registered_reader()
    fold(state, [delivered("a", "a1", 2.0), AssetReaderRegistered(uri="a", dag_id="other", at=2.0),
                 recorded_event(event_id="api/1", at=2.5)])
    fold(state, of(AssetEventForwarded, decide(state, 3.0, POLICY)))
    again = restored(state)
    assert again.assets == state.assets
    assert again.assets.ledger.recent["a"][0].event_id == "api/1"
    assert shape(decide(again, 4.0, POLICY)) == shape(decide(state, 4.0, POLICY))
