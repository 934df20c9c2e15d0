"""tock.events and tock.heartbeats are stamped by the broker (LogAppendTime): a record read back carries
the time the broker appended it, whatever its writer's clock says, on topics `tock topics create`
made, and on topics made before it set that (CreateTime), which it brings over in place, leaving
their other settings alone. Records already in an upgraded topic keep the timestamps they had."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from infra.log import LogRecord, partition_for, replay
from infra.topics import DAGS_MAX_BYTES, EVENTS_MAX_BYTES, SPECS, TopicNames, ensure_topics, topic_configs, topic_name
from schemas import DAGS, EVENTS, HEARTBEATS, LOGS, TaskHeartbeat, TaskStarted, encode

pytestmark = pytest.mark.integration

BEHIND = 120.0  # the writing runner's clock, seconds behind the broker's
MS = 0.002      # record timestamps are whole milliseconds


@pytest.fixture
def admin(kafka_bootstrap):
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def heartbeat(at: float) -> TaskHeartbeat:
    return TaskHeartbeat(dag_id="etl", run_id="r1", task_id="a", try_number=1, runner_id="h:1:x", at=at)


def started(at: float) -> TaskStarted:
    return TaskStarted(dag_id="etl", run_id="r1", task_id="a", try_number=1, runner_id="h:1:x", hostname="h", pid=1,
                       at=at)


def write_with_runner_clock(settings, logical: str, event) -> tuple[float, float]:
    """Append ``event`` stamped by a producer whose clock is BEHIND; returns (before, after) by ours."""
    producer = Producer({"bootstrap.servers": settings.bootstrap, "linger.ms": 0})
    before = time.time()
    producer.produce(topic_name(settings.topic_prefix, logical), encode(event), event.dag_id,
                     partition_for(event.dag_id, settings.partitions), timestamp=int((before - BEHIND) * 1000))
    assert producer.flush(30) == 0
    return before, time.time()


def read_back(settings, logical: str) -> list[LogRecord]:
    return list(replay(settings, logical))


def timestamp_type(admin, name: str) -> str:
    return topic_configs(admin, name)["message.timestamp.type"]


@pytest.mark.parametrize(("logical", "event"), [(HEARTBEATS, heartbeat), (EVENTS, started)])
def test_records_on_fresh_topics_carry_the_broker_s_append_time(make_settings, admin, logical, event):
    settings = make_settings()
    ensure_topics(admin, settings.topic_prefix, settings.partitions)
    before, after = write_with_runner_clock(settings, logical, event(time.time() - BEHIND))
    [record] = read_back(settings, logical)
    assert record.log_append_time and record.appended_at == record.timestamp
    assert before - MS <= record.timestamp <= after + MS
    assert record.event.at < before - BEHIND + 1  # what the runner said stays in the event


def test_topics_created_the_old_way_are_brought_to_log_append_time_in_place(make_settings, admin, caplog):
    settings = make_settings()
    names = TopicNames(settings.topic_prefix)
    # As Tock created them before: no message.timestamp.type (the broker's default, CreateTime); an
    # operator then shortened the heartbeats' retention.
    old = [NewTopic(names[spec.logical], num_partitions=settings.partitions, replication_factor=1,
                    config={"cleanup.policy": spec.cleanup, "min.insync.replicas": "1", **spec.configs,
                            **({"retention.ms": "3600000"} if spec.logical == HEARTBEATS else {})})
           for spec in SPECS]
    for future in admin.create_topics(old, operation_timeout=30).values():
        future.result()
    assert timestamp_type(admin, names[HEARTBEATS]) == "CreateTime"
    written_before, _ = write_with_runner_clock(settings, HEARTBEATS, heartbeat(time.time() - BEHIND))

    with caplog.at_level(logging.INFO, logger="tock.topics"):
        assert ensure_topics(admin, settings.topic_prefix, settings.partitions) == []
    assert sorted(record.getMessage() for record in caplog.records) == [
        f"topic {names[DAGS]}: set max.message.bytes={DAGS_MAX_BYTES}",
        f"topic {names[EVENTS]}: set message.timestamp.type=LogAppendTime max.message.bytes={EVENTS_MAX_BYTES}",
        f"topic {names[HEARTBEATS]}: set message.timestamp.type=LogAppendTime"]
    assert topic_configs(admin, names[EVENTS])["max.message.bytes"] == str(EVENTS_MAX_BYTES)
    assert topic_configs(admin, names[DAGS])["max.message.bytes"] == str(DAGS_MAX_BYTES)
    assert [timestamp_type(admin, names[logical]) for logical in (EVENTS, HEARTBEATS, LOGS)] == [
        "LogAppendTime", "LogAppendTime", "CreateTime"]
    kept = topic_configs(admin, names[HEARTBEATS])
    assert (kept["retention.ms"], kept["cleanup.policy"]) == ("3600000", "compact,delete")

    before, after = write_with_runner_clock(settings, HEARTBEATS, heartbeat(time.time() - BEHIND))
    old_record, new_record = read_back(settings, HEARTBEATS)
    assert not old_record.log_append_time and old_record.appended_at is None
    assert abs(old_record.timestamp - (written_before - BEHIND)) <= MS  # as it was written
    assert new_record.log_append_time and before - MS <= new_record.timestamp <= after + MS

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tock.topics"):
        assert ensure_topics(admin, settings.topic_prefix, settings.partitions) == []  # idempotent
    assert caplog.records == []
