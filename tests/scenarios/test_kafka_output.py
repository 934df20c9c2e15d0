"""Transactional task output through the real system (issue 24): a task writes 100 records to a user's topic
through ``kafka_output`` and then fails: a read_committed consumer sees none of them (nor does a
read_uncommitted one: a failed try's records never leave its runner); its retry writes 100 and succeeds:
exactly 100 are visible, committed in the transaction of that success."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.log.config import common_config
from schemas import TaskFailed, TaskSucceeded
from tests.scenarios.scheduler_support import start_with_dags, trigger

pytestmark = pytest.mark.scenario

RECORDS = 100

DAGS = '''
from tock import DAG, task

with DAG("writes_out") as dag:
    @task(retries=1, retry_delay=0)
    def publish(kafka_output=None, ti=None):
        for number in range({count}):
            kafka_output.produce({topic!r}, value=json.dumps({{"n": number, "try": ti.try_number}}), key=str(number))
        if ti.try_number == 1:
            raise RuntimeError("failed after writing: none of it may be seen")
        return {count}

    publish()

import json
'''


def _create(settings, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        future.result(30)


def _read_all(settings, topic: str, isolation: str) -> list[dict]:
    """Every record of ``topic`` up to its end (for read_committed: its last stable offset)."""
    consumer = Consumer({**common_config(settings, "test-output"), "group.id": f"test-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        ends = {}
        for partition in range(3):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            ends[partition] = high
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(3)])
        found, positions = [], dict.fromkeys(range(3), 0)
        while any(positions[partition] < ends[partition] for partition in range(3)):
            message = consumer.poll(1.0)
            if message is None:
                positions = {tp.partition: max(tp.offset, 0) for tp in consumer.position(
                    [TopicPartition(topic, partition) for partition in range(3)])}
                continue
            if message.error() is None:
                found.append(json.loads(message.value()))
            positions[message.partition()] = message.offset() + 1
        return found
    finally:
        consumer.close()


def test_a_failed_try_leaves_no_output_and_its_successful_retry_exactly_its_hundred(make_settings, system,
                                                                                      tmp_path):
    settings = make_settings()
    topic = f"{settings.topic_prefix}orders-out"
    _create(settings, topic)
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                                DAGS.format(count=RECORDS, topic=topic))
    processes.scheduler("s1")
    run_id = trigger(settings, "writes_out")
    assert tail.run_finished(run_id, 120).state == "success"
    (failed,) = tail.of_type(TaskFailed, run_id=run_id)
    (succeeded,) = tail.of_type(TaskSucceeded, run_id=run_id)
    assert (failed.try_number, succeeded.try_number) == (1, 2)
    committed = _read_all(settings, topic, "read_committed")
    assert sorted(record["n"] for record in committed) == list(range(RECORDS))
    assert {record["try"] for record in committed} == {2}
    everything = _read_all(settings, topic, "read_uncommitted")
    assert len(everything) == RECORDS  # try 1's records were never written at all
    print(f"\n{RECORDS} records visible to read_committed, all of try 2; try 1 (failed) wrote none")
