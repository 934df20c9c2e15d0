"""Contract tests of the log client against the real broker: round trip, partitioning, dead letters, replay."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from infra.log import DeliveryFailed, EventReader, KafkaEventLog, TransactionalSession, partition_for, replay
from infra.settings import Settings
from infra.topics import TopicNames
from schemas import DAGS, DEAD_LETTER, EVENTS, HEARTBEATS, TaskHeartbeat, encode
from tests.integration.log_helpers import high_watermarks, queued, read_until, wait_for

pytestmark = pytest.mark.integration

DAG_IDS = [f"dag-{index}" for index in range(24)] + ["etl", "reporting.daily", "dåg-ünïcode"]


def test_produce_then_replay_round_trip(kafka_settings: Settings) -> None:
    events = [queued(dag_id, task_id=f"t{index}") for index, dag_id in enumerate(DAG_IDS)]
    with KafkaEventLog(kafka_settings) as log:
        for event in events:
            log.append(event)

    records = list(replay(kafka_settings, EVENTS))

    # Compared as sorted lists: an event with a list field (TaskQueued's inputs) is not hashable.
    assert sorted((record.event for record in records), key=repr) == sorted(events, key=repr)
    assert len(records) == len(events)
    for record in records:
        assert record.topic == TopicNames(kafka_settings.topic_prefix)[EVENTS]
        assert record.key == record.event.dag_id
        assert record.partition == partition_for(record.event.dag_id, kafka_settings.partitions)
        assert record.timestamp > 0
    # per partition, the log keeps the order of appends
    for partition in range(kafka_settings.partitions):
        mine = [event for event in events if partition_for(event.dag_id, kafka_settings.partitions) == partition]
        assert [record.event for record in records if record.partition == partition] == mine


def test_replay_of_some_partitions_reads_only_those(kafka_settings: Settings) -> None:
    with KafkaEventLog(kafka_settings) as log:
        for dag_id in DAG_IDS:
            log.append(queued(dag_id))

    records = list(replay(kafka_settings, EVENTS, partitions=[1]))

    expected = [dag_id for dag_id in DAG_IDS if partition_for(dag_id, kafka_settings.partitions) == 1]
    assert [record.key for record in records] == expected


def test_heartbeats_and_tombstones(kafka_settings: Settings) -> None:
    beat = TaskHeartbeat(dag_id="etl", run_id="r1", task_id="load", try_number=1, runner_id="x", at=2.0)
    with KafkaEventLog(kafka_settings) as log:
        log.append(beat)
        log.tombstone(DAGS, "etl")

    [heartbeat] = replay(kafka_settings, HEARTBEATS)
    [tombstone] = replay(kafka_settings, DAGS)

    assert (heartbeat.key, heartbeat.partition, heartbeat.event) == ("etl|r1|load", partition_for("etl", 3), beat)
    assert (tombstone.key, tombstone.partition, tombstone.event) == ("etl", partition_for("etl", 3), None)


def test_partitions_agree_with_librdkafka_murmur2_random(kafka_settings: Settings) -> None:
    # librdkafka's murmur2_random partitioner is its port of the Java client's default one.
    topic = TopicNames(kafka_settings.topic_prefix)[DAGS]
    reference = Producer({"bootstrap.servers": kafka_settings.bootstrap, "partitioner": "murmur2_random"})
    delivered: dict[str, int] = {}
    for dag_id in DAG_IDS:
        reference.produce(topic, b"", dag_id.encode(),
                          on_delivery=lambda error, message: delivered.__setitem__(message.key().decode(),
                                                                                   message.partition()))
    assert reference.flush(30) == 0

    assert len(delivered) == len(DAG_IDS)
    assert delivered == {dag_id: partition_for(dag_id, kafka_settings.partitions) for dag_id in DAG_IDS}
    assert len(set(delivered.values())) == kafka_settings.partitions  # the sample spans every partition


def test_undecodable_records_go_to_dead_letter_and_reading_goes_on(kafka_settings: Settings) -> None:
    partition = partition_for("etl", kafka_settings.partitions)
    with KafkaEventLog(kafka_settings) as log:
        log.append(queued("etl", task_id="before"))
        log.append_raw(EVENTS, b"\x00garbage bytes", "etl", partition)
        log.append_raw(EVENTS, encode(queued("etl"))[:-3] + b"\xff", "etl", partition)  # corrupt body
        log.append(queued("etl", task_id="after"))

    with EventReader(kafka_settings, []) as reader:
        reader.assign([(EVENTS, partition, OFFSET_BEGINNING)])
        records = read_until(reader, 2)
        positions = reader.positions()

    assert [record.event.task_id for record in records] == ["before", "after"]
    assert positions == {(TopicNames(kafka_settings.topic_prefix)[EVENTS], partition): 4}
    letters = _raw_records(kafka_settings, DEAD_LETTER, partition, 2)
    assert [message.value() for message in letters][0] == b"\x00garbage bytes"
    for message, offset in zip(letters, (1, 2), strict=True):
        headers = dict(message.headers())
        assert message.key() == b"etl"
        assert headers["source.topic"] == TopicNames(kafka_settings.topic_prefix)[EVENTS].encode()
        source = (headers["source.partition"], headers["source.offset"])
        assert source == (str(partition).encode(), str(offset).encode())
    # 0x00 opens the Schema Registry frame: its "id" (b"garb") is one the registry never gave
    assert b"the schema registry has no schema id 1734439522" in dict(letters[0].headers())["reason"]
    assert b"corrupt TaskQueued" in dict(letters[1].headers())["reason"]


def test_replay_stops_at_the_end_as_it_stood_while_a_producer_keeps_writing(kafka_settings: Settings) -> None:
    topic = TopicNames(kafka_settings.topic_prefix)[EVENTS]
    with KafkaEventLog(kafka_settings) as log:
        for index in range(300):
            log.append(queued(DAG_IDS[index % len(DAG_IDS)], task_id=f"early{index}"))
    stop = threading.Event()
    writer = threading.Thread(target=_keep_writing, args=(kafka_settings, stop), daemon=True)
    writer.start()
    try:
        before = high_watermarks(kafka_settings, topic)
        records = list(replay(kafka_settings, EVENTS))
        seen = {partition: [r.offset for r in records if r.partition == partition] for partition in before}
        # the writer is still going: the log grows past where replay stopped
        wait_for(lambda: all(high_watermarks(kafka_settings, topic)[partition] > len(offsets)
                             for partition, offsets in seen.items()), "the writer to go on writing")
    finally:
        stop.set()
        writer.join(30)

    assert sum(1 for record in records if record.event.task_id.startswith("early")) == 300
    for partition, offsets in seen.items():
        assert offsets == list(range(len(offsets)))  # a gapless prefix of the partition ...
        assert len(offsets) >= before[partition]  # ... reaching at least the end when replay began


def test_replay_skips_aborted_transactions(kafka_settings: Settings) -> None:
    session = TransactionalSession(kafka_settings, f"{kafka_settings.topic_prefix}aborts")
    try:
        session.commit([queued("etl", task_id="committed-1")], None)
        with pytest.raises(TypeError, match="no dag_id"):
            session.commit([queued("etl", task_id="aborted"), object()], None)
        session.commit([queued("etl", task_id="committed-2")], None)
    finally:
        session.close()

    records = list(replay(kafka_settings, EVENTS))

    assert [record.event.task_id for record in records] == ["committed-1", "committed-2"]


def test_flush_names_records_the_broker_refused(kafka_settings: Settings) -> None:
    log = KafkaEventLog(kafka_settings)
    log.append_raw(EVENTS, encode(queued("etl")), "etl", 0)
    log.flush()  # topic metadata known from here on
    with pytest.raises(Exception, match="Unknown partition|UNKNOWN_PARTITION|Local: Unknown partition"):
        log.append_raw(EVENTS, encode(queued("etl")), "etl", 99)
        log.flush(10)
    log.close()


def test_a_broker_outage_is_logged_and_appending_goes_on(make_settings, caplog) -> None:
    # A bootstrap address nobody listens on stands for a broker that is down (the shared one stays up).
    settings = make_settings(kafka_bootstrap="127.0.0.1:1")
    caplog.set_level(logging.WARNING, logger="tock")
    log = KafkaEventLog(settings, client_id="outage")
    with EventReader(settings, [], client_id="outage-reader") as reader:
        reader.assign([(EVENTS, 0, OFFSET_BEGINNING)])
        for index in range(20):
            log.append(queued("etl", task_id=f"t{index}"))  # queued locally, no exception
            assert reader.poll(0.1) == []
    with pytest.raises(DeliveryFailed, match=r"20 record\(s\) still unacknowledged after 1.0s \(is the broker up\?\)"):
        log.flush(1.0)
    with pytest.raises(DeliveryFailed):
        log.close(timeout=0.1)
    assert any("broker unreachable" in message for message in caplog.messages)


def _keep_writing(settings: Settings, stop: threading.Event) -> None:
    with KafkaEventLog(settings, client_id="writer") as log:
        index = 0
        while not stop.is_set():
            log.append(queued(DAG_IDS[index % len(DAG_IDS)], task_id=f"late{index}"))
            index += 1
            if index % 50 == 0:
                log.flush()


def _raw_records(settings: Settings, logical: str, partition: int, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "raw-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TopicNames(settings.topic_prefix)[logical], partition, OFFSET_BEGINNING)])
    messages: list = []
    try:
        wait_for(lambda: messages.extend(m for m in consumer.consume(count, 0.5) if not m.error())
                 or len(messages) >= count, f"{count} raw records on {logical}")
    finally:
        consumer.close()
    return messages
