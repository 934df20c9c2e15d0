"""AssetWatcher through the real system (issue 24): a topic of the user's, fed 1,000 records while it
is watched; the watcher is killed with -9 twice, each time frozen inside its transaction (records read,
their events and offsets sent, not committed). The log ends with exactly 1,000 asset events, one per
record, and the DAG scheduled on the asset consumes each of them in exactly one run."""

from __future__ import annotations

import json
import threading
import time
import uuid

import psutil
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from schemas import ASSET_TRIGGERED, AssetConsumerRegistered, AssetEventRecorded, DagRunCreated
from tests.scenarios.scheduler_support import kill_hard, start_with_dags, wait_until

pytestmark = pytest.mark.scenario

RECORDS = 1000
PARTITIONS = 3

DAGS = '''
from tock import DAG, Asset, AssetWatcher, MessageQueueTrigger, task

trigger = MessageQueueTrigger(scheme="kafka", topics=[{topic!r}])
orders = Asset({uri!r}, watchers=[AssetWatcher("orders_topic", trigger)])

with DAG("on_orders", schedule=[orders], max_active_runs=4) as dag:
    @task
    def count(triggering_asset_events=None):
        return len(triggering_asset_events[orders])

    count()
'''


def _create_topic(settings, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def _feed(settings, topic: str, numbers: range) -> threading.Thread:
    """The user's producer, in the background: these records, 20 every 0.2 s, keys spreading them over the
    partitions."""
    def produce() -> None:
        producer = Producer({"bootstrap.servers": settings.bootstrap, "linger.ms": 5})
        for number in numbers:
            producer.produce(topic, key=f"order-{number}".encode(), value=json.dumps({"order": number}).encode())
            if number % 20 == 19:
                producer.flush(30)
                time.sleep(0.2)
        producer.flush(30)

    feeding = threading.Thread(target=produce, daemon=True)
    feeding.start()
    return feeding


def _watch_events(tail, topic: str) -> list[AssetEventRecorded]:
    return [event for event in tail.of_type(AssetEventRecorded) if event.event_id.startswith(f"watch/{topic}/")]


def _committed_everything(settings, topic: str) -> bool:
    """The watchers' group has committed the end of every partition of the topic."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "enable.auto.commit": False,
                         "group.id": f"{settings.topic_prefix}tock-asset-watcher"})
    try:
        parts = [TopicPartition(topic, partition) for partition in range(PARTITIONS)]
        committed = consumer.committed(parts, timeout=10)
        ends = [consumer.get_watermark_offsets(part, timeout=10)[1] for part in parts]
        return [part.offset for part in committed] == ends
    finally:
        consumer.close()


def _freeze_inside_a_transaction_then_kill(watcher, marker, feed) -> threading.Thread:
    """The watcher stops itself (SIGSTOP) inside its next transaction, after sending its offsets and
    before committing (TOCK_FAULT_STOP_BEFORE_COMMIT); then it is killed with -9 as it is. ``feed()``
    starts the records that make sure there is a next transaction (on a loaded machine the watcher may
    have caught up with everything fed before by the time the test's tail has read 200 or 500 events)."""
    marker.touch()
    feeding = feed()
    wait_until(lambda: psutil.Process(watcher.pid).status() == psutil.STATUS_STOPPED, 60,
               "the watcher to freeze inside its transaction")
    kill_hard(watcher.pid)
    watcher.wait(30)
    marker.unlink()
    return feeding


def test_a_watched_topic_fed_1000_records_with_its_watcher_killed_twice_makes_1000_events(make_settings, system,
                                                                                         tmp_path):
    unique = uuid.uuid4().hex[:8]
    topic, uri = f"orders-{unique}", f"kafka://orders-{unique}"
    marker = tmp_path / "freeze"
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, DAGS.format(uri=uri, topic=topic))
    _create_topic(settings, topic)
    processes.scheduler("s1")
    # An asset's events reach the DAGs scheduled on it when they happen (Airflow's rule): feed it once the
    # consumer is registered with the asset.
    tail.wait_for(lambda _events: tail.of_type(AssetConsumerRegistered, uri=uri), 120, "the consumer's registration")
    processes.extra_env["TOCK_FAULT_STOP_BEFORE_COMMIT"] = str(marker)

    def watcher():
        return processes.start("asset-watcher", "--name", "w0", name="asset-watcher")

    # 1,000 records in three parts: each kill's freeze is in a transaction of the part fed as it comes.
    feedings = [_feed(settings, topic, range(0, 300))]
    first = watcher()
    tail.wait_for(lambda _events: len(_watch_events(tail, topic)) >= 200, 180, "200 asset events")
    feedings.append(_freeze_inside_a_transaction_then_kill(first, marker,
                                                           lambda: _feed(settings, topic, range(300, 600))))
    second = watcher()
    tail.wait_for(lambda _events: len(_watch_events(tail, topic)) >= 500, 180, "500 asset events")
    feedings.append(_freeze_inside_a_transaction_then_kill(second, marker,
                                                           lambda: _feed(settings, topic, range(600, RECORDS))))
    watcher()
    for feeding in feedings:
        feeding.join(120)
        assert not feeding.is_alive(), "the feed to finish"
    wait_until(lambda: _committed_everything(settings, topic), 180, "the watchers to commit every record")
    tail.wait_for(lambda _events: len(_watch_events(tail, topic)) >= RECORDS, 60, "1,000 asset events")

    events = _watch_events(tail, topic)
    assert len(events) == RECORDS and len({event.event_id for event in events}) == RECORDS  # no more, no fewer
    places = {(json.loads(event.extra_json)["partition"], json.loads(event.extra_json)["offset"]) for event in events}
    assert len(places) == RECORDS
    orders = sorted(json.loads(json.loads(event.extra_json)["value"])["order"] for event in events)
    assert orders == list(range(RECORDS))

    def consumed() -> list[str]:
        runs = [event for event in tail.of_type(DagRunCreated, dag_id="on_orders") if event.run_type == ASSET_TRIGGERED]
        return [item["event_id"] for run in runs for item in json.loads(run.asset_events_json)]

    tail.wait_for(lambda _events: len(set(consumed())) >= RECORDS, 180, "the consumer's runs to take every event")
    taken = consumed()
    assert len(taken) == RECORDS and set(taken) == {event.event_id for event in events}  # each in one run
