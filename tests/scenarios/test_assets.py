"""Assets through the real system (issue 24): a producer DAG's task updates an asset; the scheduler is
killed with -9 while the task runs, so its success reaches the log with no scheduler alive (after the
success, before anything of the consumer's run); the next scheduler carries
the event across the three partitions (the producer's, the asset's, the consumer's) and the consumer DAG
runs exactly once, its task seeing the event's extra, both as what triggered its run and as the latest
event of an asset it reads (``inlet_events``). Then an external event appended twice with one request id
(an API retry) makes exactly one more run, and the asset's readers are handed it once."""

from __future__ import annotations

import json
import time

import pytest

from infra.log import partition_for
from schemas import (
    ASSET_TRIGGERED,
    AssetEventForwarded,
    AssetEventRecorded,
    DagRunCreated,
    DagRunFinished,
    TaskStarted,
    TaskSucceeded,
)
from schemas.routing import asset_partition_key
from tests.scenarios.scheduler_support import kill_hard, shared_event_log, start_with_dags, trigger

pytestmark = pytest.mark.scenario

URI = "s3://lake/orders"

DAGS = '''
from tock import DAG, Asset, task

orders = Asset({uri!r}, extra={{"owner": "lake"}})

with DAG({producer!r}) as producer:
    @task(outlets=[orders])
    def land(outlet_events=None):
        import os, time
        while not os.path.exists({flag!r}):  # the test lets it end once the scheduler is dead
            time.sleep(0.1)
        outlet_events[orders].extra["rows"] = 42
        return "landed"

    land()

with DAG({consumer!r}, schedule=[orders]) as consumer:
    @task(inlets=[orders])
    def read(triggering_asset_events=None, inlet_events=None):
        return {{"triggering": [event.extra for event in triggering_asset_events[orders]],
                "latest": inlet_events[orders][-1].extra, "read": [event.extra for event in inlet_events[orders]]}}

    read()
'''


def _apart(partitions: int) -> tuple[str, str]:
    """A producer and a consumer DAG id on two partitions, neither the asset's: every hop crosses."""
    taken = {partition_for(asset_partition_key(URI), partitions)}
    chosen = []
    for number in range(10_000):
        dag_id = f"{'producer' if not chosen else 'consumer'}_{number}"
        if partition_for(dag_id, partitions) not in taken or partitions < 3:
            chosen.append(dag_id)
            taken.add(partition_for(dag_id, partitions))
            if len(chosen) == 2:
                return chosen[0], chosen[1]
    raise AssertionError("no DAG ids on distinct partitions")


def _asset_runs(tail, consumer: str) -> list[DagRunCreated]:
    return [event for event in tail.of_type(DagRunCreated, dag_id=consumer) if event.run_type == ASSET_TRIGGERED]


def test_a_consumer_runs_once_per_event_through_a_kill_between_the_success_and_its_run(make_settings, system,
                                                                                          tmp_path):
    settings = make_settings()
    producer, consumer = _apart(settings.partitions)
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                                DAGS.format(uri=URI, producer=producer, consumer=consumer,
                                                            flag=str(tmp_path / "go")),
                                                scheduler_session_timeout=6)
    first = processes.scheduler("s1")
    # The consumer registers with the asset before any event (else the event has no one to go to).
    tail.wait_for(lambda _events: tail.of_type(AssetEventForwarded) or _registered(tail, consumer), 60,
                  "the consumer to register with its asset")
    run_id = trigger(settings, producer)
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id), 120, "the producer's task to start")
    kill_hard(first.pid)
    first.wait(30)
    (tmp_path / "go").write_text("go")  # the runner outlives its scheduler and reports the success itself
    tail.wait_for(lambda _events: tail.of_type(TaskSucceeded, run_id=run_id), 120, "the producer's task to succeed")
    assert not tail.of_type(AssetEventRecorded) and not _asset_runs(tail, consumer)  # no scheduler is up
    killed_at = time.monotonic()
    processes.scheduler("s2")
    tail.wait_for(lambda _events: [event for event in tail.of_type(DagRunFinished, dag_id=consumer)], 180,
                  "the consumer's run to finish")
    print(f"\nthe consumer's run finished {time.monotonic() - killed_at:.1f} s after the next scheduler started")
    (created,) = _asset_runs(tail, consumer)
    (event,) = tail.of_type(AssetEventRecorded)
    assert [item["event_id"] for item in json.loads(created.asset_events_json)] == [event.event_id]
    assert (event.uri, json.loads(event.extra_json), event.source_dag_id) == (URI, {"rows": 42}, producer)
    (read,) = tail.of_type(TaskSucceeded, dag_id=consumer)
    assert json.loads(read.values_json)["return_value"] == {"triggering": [{"rows": 42}], "latest": {"rows": 42},
                                                           "read": [{"rows": 42}]}
    assert tail.run_finished(created.run_id, 30).state == "success"

    # An external event appended twice with the same id (what the API writes for one Idempotency-Key), then
    # another: the asset's partition folds them in order, so once the last one is consumed a double of the
    # retried one would have been handed on before it.
    event_log = shared_event_log(settings)
    for event_id in ("api/retried", "api/retried", "api/after"):
        event_log.append(AssetEventRecorded(uri=URI, name=URI, event_id=event_id, extra_json='{"by": "api"}',
                                            requested_by="test", timestamp=time.time(), at=time.time()))
        event_log.flush()
    tail.wait_for(lambda _events: "api/after" in _consumed(tail, consumer), 120, "the external events' runs")
    assert sorted(_consumed(tail, consumer)) == sorted([event.event_id, "api/after", "api/retried"])
    assert len(tail.of_type(AssetEventForwarded)) == 3
    for later in _asset_runs(tail, consumer)[1:]:
        assert tail.run_finished(later.run_id, 120).state == "success"
    # The run that consumed the last event read every event of the asset once: the retried one is one event.
    (last,) = [created for created in _asset_runs(tail, consumer) if "api/after" in created.asset_events_json]
    (read_last,) = tail.of_type(TaskSucceeded, run_id=last.run_id)
    assert json.loads(read_last.values_json)["return_value"]["read"] == [{"rows": 42}, {"by": "api"}, {"by": "api"}]


def _consumed(tail, consumer: str) -> list[str]:
    return [item["event_id"] for created in _asset_runs(tail, consumer)
            for item in json.loads(created.asset_events_json)]


def _registered(tail, consumer: str) -> bool:
    from schemas import DagAssetsRegistered

    return bool(tail.of_type(DagAssetsRegistered, dag_id=consumer))
