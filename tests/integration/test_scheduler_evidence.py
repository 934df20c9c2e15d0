"""The grounds for declaring a try dead, against the real broker: a heartbeat partition's end as
fetched at some time becomes evidence only once the reader has read up to it; an unreachable
broker yields none, and moves the point from which runners get a whole timeout."""

from __future__ import annotations

import time

import pytest

from infra.log import EventReader, KafkaEventLog, partition_for
from infra.topics import topic_name
from schemas import HEARTBEATS, TaskHeartbeat
from services.scheduler.evidence import HeartbeatEvidence

pytestmark = pytest.mark.integration


def beat(dag_id: str, at: float) -> TaskHeartbeat:
    return TaskHeartbeat(dag_id=dag_id, run_id="r1", task_id="t", try_number=1, runner_id="r", at=at)


def test_an_end_offset_becomes_evidence_once_read_up_to(kafka_settings):
    partition = partition_for("etl", kafka_settings.partitions)
    with KafkaEventLog(kafka_settings) as events:
        for index in range(3):
            events.append(beat("etl", float(index)))
    reader = EventReader(kafka_settings, [], client_id="test-evidence")
    try:
        evidence = HeartbeatEvidence(reader, topic_name(kafka_settings.topic_prefix, HEARTBEATS))
        evidence.assigned([partition], now=100.0)
        assert evidence.of(partition) is None
        before = time.time()
        evidence.request(partition)
        evidence.read_up_to(partition, 2)  # one heartbeat still unread: no evidence yet
        assert evidence.of(partition) is None
        evidence.read_up_to(partition, 3)
        found = evidence.of(partition)
    finally:
        reader.close()
    assert found is not None and before <= found.heard_until <= time.time()
    assert found.reachable_since == 100.0  # a new owner counts reachability from its assignment


def test_an_unreachable_broker_gives_no_evidence_and_restarts_the_reachability_clock(make_settings):
    settings = make_settings(kafka_bootstrap="127.0.0.1:1")  # nothing listens there
    reader = EventReader(settings, [], client_id="test-evidence-down")
    try:
        evidence = HeartbeatEvidence(reader, topic_name(settings.topic_prefix, HEARTBEATS))
        evidence.assigned([0], now=100.0)
        evidence.request(0)
        evidence.read_up_to(0, 10**9)
        assert evidence.of(0) is None
        assert evidence.reachable_since >= time.time() - 10
    finally:
        reader.close()
