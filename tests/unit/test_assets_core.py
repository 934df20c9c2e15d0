"""Assets in the scheduler's core (issue 24): given these events on a producer DAG's partition, on the
asset's and on a consumer DAG's, these decisions — the success's events recorded on the asset's
partition, the consumer registered, each event handed to each consumer once, one run per condition
met — and, for any pattern of lost turns (a scheduler killed before its transaction committed) and
replays, every event a producer's success made consumed by exactly one consumer run."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    ASSET_TRIGGERED,
    AssetConsumerDropped,
    AssetConsumerRegistered,
    AssetDefinition,
    AssetEventForwarded,
    AssetEventQueued,
    AssetEventRecorded,
    DagAssetsRegistered,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    TaskAssetEventsRecorded,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from schemas.routing import BY_ASSET
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import ME, POLICY


def asset(uri: str) -> AssetDefinition:
    return AssetDefinition(uri=uri, name=uri)


def producer(dag_id: str = "producer", outlets: tuple[str, ...] = ("s3://a",), kind: str = "bash") -> DagParsed:
    task = TaskDefinition(task_id="make", kind=kind, command="true", outlets=[asset(uri) for uri in outlets])
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=[task])
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}", definition=definition,
                     at=0.0)


def consumer(condition: dict[str, Any], uris: tuple[str, ...], dag_id: str = "consumer",
             max_active_runs: int = 16, inlets: tuple[str, ...] = ()) -> DagParsed:
    task = TaskDefinition(task_id="use", kind="bash", command="true", inlets=[asset(uri) for uri in inlets])
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=[task],
                               asset_condition_json=json.dumps(condition),
                               schedule_assets=[asset(uri) for uri in uris], max_active_runs=max_active_runs)
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}-{len(uris)}",
                     definition=definition, at=0.0)


def run(dag_id: str = "producer", run_id: str = "r1") -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=1.0, run_type="manual", dag_fingerprint="fp",
                         scheduler_id=ME, at=1.0)


def success(queued: TaskQueued, events: list[dict[str, Any]] | None = None, at: float = 6.0) -> list[Any]:
    ids = {"dag_id": queued.dag_id, "run_id": queued.run_id, "task_id": queued.task_id,
           "try_number": queued.try_number}
    runner = f"runner-{queued.run_id}-{queued.try_number}"
    return [TaskStarted(**ids, runner_id=runner, hostname="h", pid=1, at=at - 1),
            TaskSucceeded(**ids, runner_id=runner, asset_events_json=json.dumps(events) if events else "", at=at)]


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def names(events: list[Any]) -> list[str]:
    return [type(event).__name__ for event in events]


def queued_of(state: SchedulerState, now: float = 2.0) -> TaskQueued:
    (queued,) = of(TaskQueued, decide(state, now, POLICY))
    return queued


# -- each side, given events / expect events -------------------------------------------------------

def test_a_success_with_asset_events_records_each_on_its_asset_partition_once():
    state = fold(SchedulerState(), [producer(outlets=("s3://a", "s3://b")), run()])
    queued = queued_of(state)
    made = [{"uri": "s3://a", "name": "a", "group": "asset", "extra": {"rows": 3}, "alias": ""},
            {"uri": "s3://b", "name": "s3://b", "group": "asset", "extra": {}, "alias": ""}]
    fold(state, [queued, *success(queued, made)])
    decided = decide(state, 7.0, POLICY)
    recorded = of(AssetEventRecorded, decided)
    assert [(event.uri, json.loads(event.extra_json), event.source_task_id, event.event_id) for event in recorded] == [
        ("s3://a", {"rows": 3}, "make", "producer|r1|make|-1|1|s3://a"),
        ("s3://b", {}, "make", "producer|r1|make|-1|1|s3://b")]
    (mark,) = of(TaskAssetEventsRecorded, decided)
    assert mark.event_ids == [event.event_id for event in recorded]
    fold(state, decided)
    assert not of(AssetEventRecorded, decide(state, 8.0, POLICY))  # the mark is folded: nothing is due again


def test_a_success_reported_twice_records_its_events_once():
    state = fold(SchedulerState(), [producer(), run()])
    queued = queued_of(state)
    fold(state, [queued, *success(queued)])
    fold(state, decide(state, 7.0, POLICY))
    fold(state, success(queued)[1:])  # the runner's outcome, resent from its spool
    assert not of(AssetEventRecorded, decide(state, 8.0, POLICY))


def test_a_success_without_reported_events_updates_the_task_outlets_and_an_empty_task_its_too():
    state = fold(SchedulerState(), [producer(outlets=("s3://a",)), run()])
    queued = queued_of(state)
    fold(state, [queued, *success(queued)])
    assert [event.uri for event in of(AssetEventRecorded, decide(state, 7.0, POLICY))] == ["s3://a"]
    empty = fold(SchedulerState(), [producer(kind="empty", outlets=("s3://e",)), run()])
    decided = decide(empty, 2.0, POLICY)
    assert names(decided)[:1] == ["TaskEmptySucceeded"]
    fold(empty, decided)
    assert [event.uri for event in of(AssetEventRecorded, decide(empty, 3.0, POLICY))] == ["s3://e"]


def test_a_consumer_registers_with_its_assets_and_drops_those_its_schedule_no_longer_names():
    state = fold(SchedulerState(), [consumer({"all": [{"asset": "a"}, {"asset": "b"}]}, ("a", "b"))])
    decided = decide(state, 1.0, POLICY)
    assert [(type(event).__name__, getattr(event, "uri", None)) for event in decided] == [
        ("AssetConsumerRegistered", "a"), ("AssetConsumerRegistered", "b"), ("DagAssetsRegistered", None)]
    fold(state, decided)
    assert decide(state, 2.0, POLICY) == []
    fold(state, [consumer({"asset": "b"}, ("b",))])
    decided = decide(state, 3.0, POLICY)
    assert [(type(event).__name__, getattr(event, "uri", None)) for event in decided] == [
        ("AssetConsumerDropped", "a"), ("DagAssetsRegistered", None)]


def recorded_event(uri: str = "a", event_id: str = "api/1", at: float = 3.0) -> AssetEventRecorded:
    return AssetEventRecorded(uri=uri, name=uri, event_id=event_id, extra_json='{"k": 1}', timestamp=at, at=at)


def test_the_asset_side_hands_each_event_to_every_consumer_once_and_a_repeated_request_not_again():
    state = fold(SchedulerState(), [AssetConsumerRegistered(uri="a", dag_id="c1", at=1.0),
                                    AssetConsumerRegistered(uri="a", dag_id="c2", at=1.0),
                                    AssetConsumerRegistered(uri="b", dag_id="c3", at=1.0), recorded_event()])
    decided = decide(state, 4.0, POLICY)
    assert [(type(event).__name__, getattr(event, "dag_id", None)) for event in decided] == [
        ("AssetEventQueued", "c1"), ("AssetEventQueued", "c2"), ("AssetEventForwarded", None)]
    assert of(AssetEventQueued, decided)[0].extra_json == '{"k": 1}'
    fold(state, decided)
    fold(state, [recorded_event(at=9.0)])  # the API request retried with the same Idempotency-Key
    assert decide(state, 10.0, POLICY) == []


def test_an_event_of_an_asset_nobody_consumes_is_marked_handed_to_none():
    state = fold(SchedulerState(), [recorded_event()])
    assert [(type(event).__name__, event.dag_ids) for event in decide(state, 4.0, POLICY)] == [
        ("AssetEventForwarded", [])]


def registered(condition: dict[str, Any], uris: tuple[str, ...], **options: Any) -> SchedulerState:
    state = fold(SchedulerState(), [consumer(condition, uris, **options)])
    return fold(state, decide(state, 1.0, POLICY))


def handed(uri: str, event_id: str, at: float = 3.0, dag_id: str = "consumer") -> AssetEventQueued:
    return AssetEventQueued(dag_id=dag_id, uri=uri, name=uri, event_id=event_id, extra_json="{}",
                            source_dag_id="producer", source_run_id="r1", source_task_id="make", timestamp=at, at=at)


def test_a_consumer_runs_once_its_condition_is_met_and_the_run_consumes_the_events_queued():
    state = registered({"all": [{"asset": "a"}, {"any": [{"asset": "b"}, {"asset": "c"}]}]}, ("a", "b", "c"))
    fold(state, [handed("a", "e1"), handed("a", "e2", at=3.5)])
    assert not of(DagRunCreated, decide(state, 4.0, POLICY))  # a, but neither b nor c
    fold(state, [handed("c", "e3", at=4.5)])
    (created,) = of(DagRunCreated, decide(state, 5.0, POLICY))
    assert (created.run_type, created.run_id) == (ASSET_TRIGGERED, "asset_triggered__1970-01-01T00:00:05+00:00")
    assert [item["event_id"] for item in json.loads(created.asset_events_json)] == ["e1", "e2", "e3"]
    fold(state, [created])
    assert not of(DagRunCreated, decide(state, 6.0, POLICY))  # consumed: no second run
    (queued,) = of(TaskQueued, decide(state, 6.0, POLICY))
    assert json.loads(queued.triggering_asset_events_json) == json.loads(created.asset_events_json)


def test_an_event_queued_between_a_decision_and_its_fold_waits_for_the_next_run():
    state = registered({"asset": "a"}, ("a",))
    fold(state, [handed("a", "e1")])
    (created,) = of(DagRunCreated, decide(state, 4.0, POLICY))
    fold(state, [handed("a", "e2", at=4.5), created])  # e2 landed before the run was read back
    (second,) = of(DagRunCreated, decide(state, 5.0, POLICY))
    assert [item["event_id"] for item in json.loads(second.asset_events_json)] == ["e2"]


def test_a_paused_or_full_consumer_keeps_its_queue_and_an_event_for_a_dropped_asset_is_not_queued():
    state = registered({"asset": "a"}, ("a",), max_active_runs=1)
    fold(state, [run("consumer", "manual__x"), handed("a", "e1"), handed("z", "e9")])
    assert not of(DagRunCreated, decide(state, 4.0, POLICY))  # its one run is active
    assert list(state.assets.queues["consumer"]) == ["e1"]


def test_the_asset_sides_survive_a_snapshot():
    state = registered({"asset": "a"}, ("a",))
    fold(state, [handed("a", "e1"), producer(), run(), AssetConsumerRegistered(uri="a", dag_id="consumer", at=1.0),
                 recorded_event(event_id="api/7")])
    queued = of(TaskQueued, decide(state, 2.0, POLICY))[0]
    fold(state, [queued, *success(queued)])
    again = restored(state)
    assert again.assets == state.assets
    assert names(decide(again, 7.0, POLICY)) == names(decide(state, 7.0, POLICY))


# -- three partitions, turns lost at random -----------------------------------------------------------

def restored(state: SchedulerState) -> SchedulerState:
    return decode_snapshot(encode_snapshot(Snapshot(0, state, {}))).state


def partition_of(event: Any) -> str:
    if type(event).ROUTE is BY_ASSET:
        return "asset"
    return "producer" if event.dag_id == "producer" else "consumer"


@settings(max_examples=60, deadline=None)
@given(lost=st.lists(st.booleans(), min_size=40, max_size=40), successes=st.integers(1, 4),
       snapshot_at=st.integers(0, 39), reads_at=st.integers(0, 39))
def test_every_event_of_a_success_is_consumed_by_exactly_one_run_whatever_turns_are_lost(lost, successes,
                                                                                          snapshot_at, reads_at):
    """A turn whose decisions are lost is a scheduler killed before its transaction committed (the next
    owner folds the same log and decides again); a snapshot restored is a takeover from it. From turn
    ``reads_at`` the consumer reads the asset too (``inlets``, a new definition): it ends with every event,
    those handed on before it read and those after."""
    states = {"producer": SchedulerState(), "asset": SchedulerState(), "consumer": SchedulerState()}
    fold(states["producer"], [producer(), *[run(run_id=f"r{number}") for number in range(successes)]])
    fold(states["consumer"], [consumer({"asset": "s3://a"}, ("s3://a",))])
    log: list[Any] = []
    now = 2.0
    for turn, lose in enumerate([*lost, *[False] * 30]):  # then turns without losses until quiet
        now += 1.0
        if turn == snapshot_at:
            states = {name: restored(state) for name, state in states.items()}
        if turn == reads_at:
            fold(states["consumer"], [consumer({"asset": "s3://a"}, ("s3://a",), inlets=("s3://a",))])
        for name in ("producer", "asset", "consumer"):
            decided = decide(states[name], now, POLICY)
            if lose:
                continue
            for event in decided:
                log.append(event)
                fold(states[partition_of(event)], [event])
                if isinstance(event, TaskQueued):  # its runner: started, succeeded (an outlet of s3://a)
                    for outcome in success(event, at=now + 0.5):
                        log.append(outcome)
                        fold(states[partition_of(outcome)], [outcome])
    produced = [event.event_id for event in of(AssetEventRecorded, log)]
    consumed = [item["event_id"] for created in of(DagRunCreated, log) if created.run_type == ASSET_TRIGGERED
                for item in json.loads(created.asset_events_json)]
    assert len(produced) == len(set(produced)) == successes
    assert sorted(consumed) == sorted(produced)  # each consumed once, none lost
    assert len(of(AssetEventForwarded, log)) == successes
    registrations = of(DagAssetsRegistered, log)  # one, or two when it read only after registering
    assert len(registrations) in (1, 2) and registrations[-1].inlet_uris == ["s3://a"]
    assert not of(AssetConsumerDropped, log)
    assert not states["consumer"].assets.queues and not states["asset"].assets.ledger.pending
    assert not states["producer"].assets.outbox
    assert sorted(states["consumer"].assets.inlet_events["consumer"]["s3://a"]) == sorted(produced)
