"""The partitioner agrees with the Java client's (and librdkafka's murmur2) on published test vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.log import murmur2, partition_for, routing_key
from schemas import EVENT_TYPES, HEARTBEATS, LOGS, TaskHeartbeat, TaskQueued
from schemas.freeze import sample
from schemas.routing import BY_ASSET, BY_POOL

# Apache Kafka, clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2():
# Utils.murmur2(bytes) as Java's signed int.
KAFKA_UTILS_TEST = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# librdkafka, src/rdmurmur2.c, unittest_murmur2(): `java_murmur2_results` (uint32 bit patterns),
# covering every tail length (0..3 bytes) and the empty key.
LIBRDKAFKA_UNITTEST = {
    b"kafka": 0xD067CF64,
    b"giberish123456789": 0x8F552B0C,
    b"1234": 0x9FC97B14,
    b"234": 0xE7C009CA,
    b"34": 0x873930DA,
    b"4": 0x5A4B5CA1,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x78424F1C,
    b"reAmbleWillBeRemoved,ThePrePartThatIs": 0x4A62B377,
    b"eAmbleWillBeRemoved,ThePrePartThatIs": 0xE0E4E09E,
    b"AmbleWillBeRemoved,ThePrePartThatIs": 0x62B8B43F,
    b"": 0x106E08D9,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_UTILS_TEST.items())
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), LIBRDKAFKA_UNITTEST.items())
def test_murmur2_matches_librdkafka_unittest(data: bytes, expected: int) -> None:
    assert murmur2(data) & 0xFFFFFFFF == expected


@pytest.mark.parametrize("partitions", [1, 3, 12, 50])
@pytest.mark.parametrize(("data", "java_hash"), KAFKA_UTILS_TEST.items())
def test_partition_is_java_default_partitioners_choice(data: bytes, java_hash: int, partitions: int) -> None:
    # BuiltInPartitioner.partitionForKey: Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions
    assert partition_for(data.decode(), partitions) == (java_hash & 0x7FFFFFFF) % partitions


def test_partition_key_is_utf8_encoded() -> None:
    assert partition_for("dåg-✓", 12) == (murmur2("dåg-✓".encode()) & 0x7FFFFFFF) % 12


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_partition_is_in_range_and_stable(key: str, partitions: int) -> None:
    chosen = partition_for(key, partitions)
    assert 0 <= chosen < partitions
    assert partition_for(key, partitions) == chosen


def test_a_topic_without_partitions_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for("etl", 0)


@pytest.mark.parametrize("cls", sorted(EVENT_TYPES.values(), key=lambda cls: cls.__name__), ids=lambda c: c.__name__)
def test_every_event_has_a_routing_key(cls: type) -> None:
    event = sample(cls)
    key, partition_key = routing_key(event)
    dag_id = getattr(event, "dag_id", None)
    if cls.ROUTE is BY_POOL:  # a pool's ledger is on its pool's partition, whatever DAG asks (schemas/pools.py)
        assert partition_key == f"pool/{event.pool}"
    elif cls.ROUTE is BY_ASSET:  # an asset's ledger is on its asset's partition (schemas/assets.py)
        assert partition_key == f"asset/{event.uri}"
    elif dag_id is not None:
        assert partition_key == dag_id  # partition p of every topic concerns the same DAGs
    assert key and partition_key
    if cls.TOPIC not in (HEARTBEATS, LOGS):  # those are keyed by task instance / try
        assert key == partition_key


def test_heartbeats_are_keyed_by_task_instance_and_partitioned_by_dag() -> None:
    beat = TaskHeartbeat(dag_id="etl", run_id="r1", task_id="load", try_number=2, runner_id="x", at=1.0)
    queued = TaskQueued(dag_id="etl", run_id="r1", task_id="load", try_number=2, executor="local",
                        queue="default", scheduler_id="s1", at=1.0)
    assert routing_key(beat) == ("etl|r1|load", "etl")
    assert routing_key(queued) == ("etl", "etl")


def test_an_event_without_a_routing_field_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="pass key= and partition_key="):
        routing_key(object())
