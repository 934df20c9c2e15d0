"""``inlet_events`` as a try reads it (issue 24): the task's ``inlets`` in its definition, the latest events
of each inlet asset from the try's TaskQueued, found by Asset, uri, name or index, narrowed as Airflow's
accessor narrows them, and every mistake a KeyError naming the task's inlets."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from schemas import TaskQueued
from tock import DAG, Asset, AssetAlias, BashTask, task
from tock.context import build_context
from tock.inlet_events import InletEventsAccessors

RAW, CLEAN = Asset(name="raw", uri="s3://raw"), Asset("s3://clean")


def item(uri: str, event_id: str, at: float, **extra: object) -> dict:
    return {"uri": uri, "name": "raw" if uri == "s3://raw" else uri, "group": "asset", "event_id": event_id,
            "extra_json": json.dumps(extra), "source_dag_id": "p", "source_run_id": "r", "source_task_id": "t",
            "source_map_index": -1, "source_alias": "", "timestamp": at}


CARRIED = json.dumps({"s3://raw": [item("s3://raw", "e1", 10.0, n=1), item("s3://raw", "e2", 20.0, n=2),
                                   item("s3://raw", "e3", 30.0, n=3)], "s3://clean": []})


def test_the_task_definition_names_its_inlet_assets():
    with DAG("reader") as dag:
        BashTask("read", "true", inlets=[RAW, AssetAlias("some"), CLEAN])
        BashTask("plain", "true")
    tasks = {made.task_id: made for made in dag.to_definition("/dags/r.py").tasks}
    assert [inlet.uri for inlet in tasks["read"].inlets] == ["s3://raw", "s3://clean"]
    assert tasks["plain"].inlets == []


def test_an_inlet_is_found_by_asset_uri_name_or_index_and_its_events_are_oldest_first():
    events = InletEventsAccessors([RAW, CLEAN], CARRIED)
    by_asset = events[RAW]
    assert [event.extra["n"] for event in by_asset] == [1, 2, 3]
    assert [e.extra for e in events["s3://raw"]] == [e.extra for e in events["raw"]] == [e.extra for e in events[0]]
    assert by_asset[-1].source_task_id == "t" and by_asset[-1].timestamp == datetime.fromtimestamp(30.0, UTC)
    assert by_asset[-1].asset == RAW and len(by_asset) == 3 and list(events[1]) == []
    assert list(events) == [RAW, CLEAN] and len(events) == 2


def test_the_events_narrow_by_time_order_and_count_as_airflows_do():
    events = InletEventsAccessors([RAW], CARRIED)
    assert [e.extra["n"] for e in events[RAW].after(datetime.fromtimestamp(20.0, UTC))] == [2, 3]
    assert [e.extra["n"] for e in events[RAW].before("1970-01-01T00:00:20+00:00")] == [1, 2]
    assert [e.extra["n"] for e in events[RAW].ascending(False).limit(2)] == [3, 2]
    with pytest.raises(ValueError, match="non-negative"):
        events[RAW].limit(-1)
    with pytest.raises(ValueError, match="ISO 8601"):
        events[RAW].after("yesterday")


def test_an_asset_that_is_not_an_inlet_or_an_alias_is_a_key_error_naming_the_inlets():
    events = InletEventsAccessors([RAW, AssetAlias("some")], CARRIED)
    with pytest.raises(KeyError, match="not one of the task's inlets.*s3://raw"):
        events[CLEAN]
    with pytest.raises(KeyError, match="alias"):
        events[AssetAlias("some")]
    with pytest.raises(IndexError):
        events[5]
    assert CLEAN not in events and RAW in events


def test_a_try_reads_its_inlets_events_from_its_task_queued_and_a_try_without_any_reads_none():
    with DAG("reader") as dag:
        @task(inlets=[RAW])
        def read(inlet_events=None):
            return inlet_events[RAW][-1].extra

        read()
    made = dag.tasks["read"]
    queued = TaskQueued(dag_id="reader", run_id="r1", task_id="read", try_number=1, executor="local",
                        queue="default", scheduler_id="s", inlet_events_json=CARRIED, at=1.0)
    context = build_context(made, "r1", 1, queued)
    assert context["inlets"] == [RAW] and context["inlet_events"][RAW][-1].extra == {"n": 3}
    assert list(build_context(made, "r1", 1, None)["inlet_events"][RAW]) == []
