"""The asset and asset_event read models (projections/asset.py): given these events, then these rows; and
the fold's invariants over random asset logs (batches, replays, interleavings of partitions)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas.assets
from projections import asset
from projections.view import View, fold, touched_keys
from schemas import (
    ASSET_TRIGGERED,
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
    DagDefinition,
    DagParsed,
    DagRunCreated,
    InletEventDelivered,
    TaskAssetEventsRecorded,
    TaskDefinition,
)
from schemas.declare import EventBase
from tests.unit.projection_logs import LogBuilder, interleavings

RAW = "s3://lake/raw"
CLEAN = "s3://lake/clean"


def _rows(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records).rows


def _asset(rows, uri):
    return rows["asset"].get((uri,))


def _event(rows, uri, event_id):
    return rows["asset_event"].get((uri, event_id))


def parsed(dag_id, at, outlets=None, schedule=(), fingerprint=None, **asset_fields):
    """DagParsed of a DAG whose tasks update ``outlets`` (task id -> uris) and whose schedule names ``schedule``."""
    tasks = [TaskDefinition(task_id=task_id, kind="bash", command="true",
                            outlets=[AssetDefinition(uri=uri, **asset_fields) for uri in uris])
             for task_id, uris in (outlets or {}).items()]
    condition = json.dumps({"all": [{"asset": uri} for uri in schedule]}) if schedule else ""
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=tasks,
                               asset_condition_json=condition,
                               schedule_assets=[AssetDefinition(uri=uri, **asset_fields) for uri in schedule])
    return DagParsed(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", fingerprint=fingerprint or f"fp-{dag_id}-{at}",
                     definition=definition, at=at)


def recorded(uri, event_id, timestamp, **fields):
    return AssetEventRecorded(uri=uri, event_id=event_id, timestamp=timestamp, at=fields.pop("at", timestamp),
                              **fields)


def item(event: AssetEventRecorded) -> dict:
    """The event as a run that consumed it names it (services/scheduler/core/assets.py triggering_json)."""
    return {"uri": event.uri, "name": event.name, "group": event.group, "event_id": event.event_id,
            "extra_json": event.extra_json, "source_dag_id": event.source_dag_id,
            "source_run_id": event.source_run_id, "source_task_id": event.source_task_id,
            "source_map_index": event.source_map_index, "source_alias": event.source_alias,
            "timestamp": event.timestamp}


def run_created(dag_id, run_id, *events, at=50.0, asset_events_json=None):
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type=ASSET_TRIGGERED,
                         dag_fingerprint="f", scheduler_id="s1", at=at,
                         asset_events_json=asset_events_json if asset_events_json is not None
                         else json.dumps([item(event) for event in events], sort_keys=True))


PRODUCED = recorded(RAW, "etl|r1|load|-1|1|s3://lake/raw", 20.0, name="raw", source_dag_id="etl",
                    source_run_id="r1", source_task_id="load", source_try_number=1, extra_json='{"rows": 5}')


def test_a_definition_makes_its_outlets_and_scheduled_assets_appear_before_any_event():
    rows = _rows(parsed("etl", 10.0, outlets={"load": [RAW], "extract": [RAW]}, name="raw", group="lake",
                        extra_json='{"owner": "data"}'),
                 parsed("report", 11.0, schedule=[RAW, CLEAN]))
    raw = _asset(rows, RAW)
    assert json.loads(raw["references_json"]) == {
        "etl": {"fingerprint": "fp-etl-10.0", "at": 10.0, "tasks": ["extract", "load"], "name": "raw",
                "group": "lake", "extra_json": '{"owner": "data"}'},
        "report": {"fingerprint": "fp-report-11.0", "at": 11.0, "tasks": [], "name": "", "group": "asset",
                   "extra_json": "{}"}}
    assert (raw["event_count"], raw["last_event_at"], raw["consuming_dags_json"], raw["updated_at"]) == (
        0, None, "[]", 11.0)
    assert json.loads(_asset(rows, CLEAN)["references_json"])["report"]["tasks"] == []
    assert rows["asset_event"] == {}


def test_the_definition_parsed_last_names_the_asset_whatever_order_the_dags_are_read_in():
    first, last = parsed("zeta", 10.0, outlets={"t": [RAW]}, name="old"), parsed("alpha", 12.0, outlets={"t": [RAW]},
                                                                                 name="new", group="g")
    for events in ((first, last), (last, first)):
        row = _asset(_rows(*events, PRODUCED), RAW)
        assert (row["name"], row["group"]) == ("new", "g")  # the events' name does not overturn a definition's


def test_a_new_definition_of_a_dag_replaces_what_its_old_one_said():
    rows = _rows(parsed("etl", 10.0, outlets={"load": [RAW]}), parsed("etl", 20.0, outlets={"publish": [RAW]}))
    assert json.loads(_asset(rows, RAW)["references_json"])["etl"]["tasks"] == ["publish"]


def test_an_event_counts_in_its_asset_and_is_a_row_of_its_own():
    rows = _rows(parsed("etl", 10.0, outlets={"load": [RAW]}), PRODUCED,
                 recorded(RAW, "api/q1", 30.0, requested_by="olga", extra_json='{"by": "hand"}'))
    raw = _asset(rows, RAW)
    assert (raw["event_count"], raw["last_event_at"], raw["updated_at"]) == (2, 30.0, 30.0)
    assert _event(rows, RAW, PRODUCED.event_id) == {
        "uri": RAW, "event_id": PRODUCED.event_id, "name": "raw", "group": "asset", "extra_json": '{"rows": 5}',
        "source_dag_id": "etl", "source_run_id": "r1", "source_task_id": "load", "source_map_index": -1,
        "source_alias": "", "requested_by": "", "timestamp": 20.0, "recorded_at": 20.0, "consumed_by_json": "[]"}
    assert _event(rows, RAW, "api/q1")["requested_by"] == "olga"


def test_an_event_appended_again_is_applied_once_and_the_first_one_stands():
    again = recorded(RAW, "api/q1", 40.0, extra_json='{"n": 2}')
    rows = _rows(recorded(RAW, "api/q1", 30.0, extra_json='{"n": 1}'), again)
    raw, event = _asset(rows, RAW), _event(rows, RAW, "api/q1")
    assert (raw["event_count"], raw["last_event_at"], raw["updated_at"]) == (1, 30.0, 30.0)
    assert (event["timestamp"], event["extra_json"]) == (30.0, '{"n": 1}')


def test_an_asset_only_events_updated_is_named_by_its_latest_event():
    rows = _rows(recorded(CLEAN, "api/1", 1.0, name="first"), recorded(CLEAN, "api/2", 2.0, name="second"),
                 recorded(CLEAN, "api/3", 3.0))
    row = _asset(rows, CLEAN)
    assert (row["name"], row["group"], row["extra_json"], row["references_json"], row["event_count"]) == (
        "second", "asset", "{}", "{}", 3)


def test_the_same_event_id_of_two_assets_is_two_events():
    rows = _rows(recorded(RAW, "api/q1", 1.0), recorded(CLEAN, "api/q1", 2.0))
    assert _asset(rows, RAW)["event_count"] == _asset(rows, CLEAN)["event_count"] == 1
    assert set(rows["asset_event"]) == {(RAW, "api/q1"), (CLEAN, "api/q1")}


def test_consumers_register_and_drop():
    registered = [AssetConsumerRegistered(uri=RAW, dag_id=dag_id, at=at) for dag_id, at in (("report", 5.0),
                                                                                           ("audit", 6.0))]
    rows = _rows(*registered, AssetConsumerRegistered(uri=RAW, dag_id="report", at=7.0))
    assert json.loads(_asset(rows, RAW)["consuming_dags_json"]) == ["audit", "report"]
    dropped = _rows(*registered, AssetConsumerDropped(uri=RAW, dag_id="report", at=8.0),
                    AssetConsumerDropped(uri=RAW, dag_id="never", at=9.0))
    row = _asset(dropped, RAW)
    assert (json.loads(row["consuming_dags_json"]), row["updated_at"]) == (["audit"], 9.0)


def test_a_run_that_consumed_an_event_is_named_in_its_row_read_before_or_after_the_event():
    api = recorded(RAW, "api/q1", 30.0, requested_by="olga")
    runs = [run_created("report", "asset_triggered__1", PRODUCED, api),
            run_created("audit", "asset_triggered__2", api, at=60.0)]
    after, before = _rows(PRODUCED, api, *runs), _rows(*runs, PRODUCED, api)
    assert after["asset_event"] == before["asset_event"]
    assert json.loads(_event(after, RAW, "api/q1")["consumed_by_json"]) == [
        {"dag_id": "audit", "run_id": "asset_triggered__2"}, {"dag_id": "report", "run_id": "asset_triggered__1"}]
    assert _asset(before, RAW)["event_count"] == 2  # a run naming an event does not count it


def test_an_event_only_a_run_names_so_far_is_what_the_run_says_until_its_record_is_read():
    rows = _rows(run_created("report", "r9", PRODUCED))
    event = _event(rows, RAW, PRODUCED.event_id)
    assert (event["source_task_id"], event["timestamp"], event["recorded_at"], event["requested_by"]) == (
        "load", 20.0, None, None)
    assert _asset(rows, RAW) is None


@pytest.mark.parametrize("asset_events_json", [
    "", "not json", '{"uri": "x"}', '[1, "x", null]', '[{"uri": "x"}]', '[{"uri": 1, "event_id": "e"}]',
    '[{"uri": "x", "event_id": "e", "source_map_index": "nine", "timestamp": "late", "name": 3}]'])
def test_a_run_s_odd_asset_events_change_nothing_but_what_they_name_clearly(asset_events_json):
    record = LogBuilder().add(run_created("report", "r1", asset_events_json=asset_events_json))
    assert touched_keys([record])["dag_run"] == {("report", "r1")}  # the run itself is folded
    view = fold([record])
    assert view.rows["dag_run"][("report", "r1")]["state"] == "running"
    for row in view.rows["asset_event"].values():
        assert (row["uri"], row["event_id"], row["source_map_index"], row["timestamp"], row["name"]) == (
            "x", "e", -1, 0.0, "")


def test_the_scheduler_s_marks_and_queues_change_no_row():
    marks = [TaskAssetEventsRecorded(dag_id="etl", run_id="r1", task_id="load", try_number=1,
                                     event_ids=[PRODUCED.event_id], at=21.0),
             AssetEventForwarded(uri=RAW, event_id=PRODUCED.event_id, dag_ids=["report"], at=22.0),
             AssetEventQueued(dag_id="report", uri=RAW, event_id=PRODUCED.event_id, timestamp=20.0, at=22.0),
             DagAssetsRegistered(dag_id="report", uris=[RAW], at=5.0)]
    assert _rows(PRODUCED, *marks) == _rows(PRODUCED)


def _declared_in(module) -> set[type]:
    return {value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, EventBase) and value is not EventBase}


def test_every_asset_event_is_folded_or_named_as_not_folded():
    named = set(asset.FOLDED) | set(asset.NOT_FOLDED)
    assert _declared_in(schemas.assets) <= named
    assert not set(asset.FOLDED) & set(asset.NOT_FOLDED)
    for cls in asset.NOT_FOLDED:
        assert asset.slots_of(LogBuilder().add(_sample(cls))) is None, cls


def _sample(cls):
    return {TaskAssetEventsRecorded: TaskAssetEventsRecorded(dag_id="d", run_id="r", task_id="t", try_number=1,
                                                             event_ids=[], at=1.0),
            AssetEventForwarded: AssetEventForwarded(uri="u", event_id="e", dag_ids=[], at=1.0),
            DagAssetsRegistered: DagAssetsRegistered(dag_id="d", uris=[], at=1.0),
            AssetEventQueued: AssetEventQueued(dag_id="d", uri="u", event_id="e", timestamp=1.0, at=1.0),
            AssetReaderRegistered: AssetReaderRegistered(uri="u", dag_id="d", at=1.0),
            AssetReaderDropped: AssetReaderDropped(uri="u", dag_id="d", at=1.0),
            AssetReaderCaughtUp: AssetReaderCaughtUp(uri="u", dag_id="d", at=1.0),
            InletEventDelivered: InletEventDelivered(dag_id="d", uri="u", event_id="e", timestamp=1.0, at=1.0)}[cls]


# --- the fold's invariants over random asset logs -------------------------------------------------------------

_URIS = (RAW, CLEAN)
_DAGS = ("etl", "report")
_IDS = ("api/q1", "api/q2", "etl|r1|load|-1|1")
_times = st.integers(min_value=1, max_value=50).map(float)


def _recorded_strategy():
    def build(uri, event_id, at, name):
        return recorded(uri, event_id, at, name=name, extra_json=json.dumps({"at": at}))

    return st.builds(build, st.sampled_from(_URIS), st.sampled_from(_IDS), _times, st.sampled_from(("", "n1", "n2")))


def _consistent_item(uri: str, event_id: str) -> dict:
    # A run names an event as it was recorded: every run naming it says the same of it.
    return item(recorded(uri, event_id, float(len(event_id)), name="named", source_dag_id="etl"))


ASSET_EVENTS = st.one_of(
    st.builds(lambda dag, at, outlets, schedule, name: parsed(dag, at, outlets={"t": outlets}, schedule=schedule,
                                                              name=name),
              st.sampled_from(_DAGS), _times, st.lists(st.sampled_from(_URIS), unique=True, max_size=2),
              st.lists(st.sampled_from(_URIS), unique=True, max_size=2), st.sampled_from(("a", "b"))),
    _recorded_strategy(),
    st.builds(lambda uri, dag, at: AssetConsumerRegistered(uri=uri, dag_id=dag, at=at),
              st.sampled_from(_URIS), st.sampled_from(_DAGS), _times),
    st.builds(lambda uri, dag, at: AssetConsumerDropped(uri=uri, dag_id=dag, at=at),
              st.sampled_from(_URIS), st.sampled_from(_DAGS), _times),
    st.builds(lambda dag, run, named, at: run_created(dag, run, at=at, asset_events_json=json.dumps(
        [_consistent_item(uri, event_id) for uri, event_id in named])),
              st.sampled_from(_DAGS), st.sampled_from(("r1", "r2")),
              st.lists(st.tuples(st.sampled_from(_URIS), st.sampled_from(_IDS)), max_size=3), _times),
)


@st.composite
def asset_logs(draw):
    builder = LogBuilder()
    for event in draw(st.lists(ASSET_EVENTS, max_size=40)):
        builder.add(event)
    return builder.records


def _tables(view: View) -> dict:
    return {table: {key: row for key, row in view.rows[table].items() if row is not None} for table in asset.TABLES}


def _fold_in_batches(records, cuts) -> dict:
    store: dict = {}
    offsets: dict = {}
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        batch = records[start:end]
        loaded = {table: {key: store[(table, key)] for key in keys if (table, key) in store}
                  for table, keys in touched_keys(batch).items()}
        view = fold(batch, View(rows=loaded, offsets=dict(offsets)))
        store.update({(table, key): row for table, by_key in view.rows.items() for key, row in by_key.items()})
        offsets = view.offsets
    return {table: {key: row for (name, key), row in store.items() if name == table and row is not None}
            for table in asset.TABLES}


@settings(max_examples=150, deadline=None)
@given(log=asset_logs(), cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_folding_an_asset_log_in_one_batch_or_many_gives_the_same_rows(log, cuts):
    assert _fold_in_batches(log, cuts) == _tables(fold(log))


@settings(max_examples=150, deadline=None)
@given(log=asset_logs(), data=st.data())
def test_any_interleaving_of_the_partitions_gives_the_same_asset_rows(log, data):
    assert _tables(fold(interleavings(log, data))) == _tables(fold(log))


@settings(max_examples=100, deadline=None)
@given(log=asset_logs(), data=st.data())
def test_folding_an_asset_log_twice_changes_nothing(log, data):
    assert _tables(fold(data.draw(st.permutations(log)), fold(log))) == _tables(fold(log))


@settings(max_examples=100, deadline=None)
@given(log=asset_logs())
def test_an_asset_counts_each_of_its_events_once(log):
    view = fold(log)
    for (uri,), row in view.rows["asset"].items():
        recorded_ids = {event_id for (of, event_id), event in view.rows["asset_event"].items()
                        if of == uri and event["recorded_at"] is not None}
        assert row["event_count"] == len(recorded_ids)
