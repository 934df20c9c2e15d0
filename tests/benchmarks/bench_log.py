"""The log client on the local broker: produce rate, replay rate of one 1M-event partition,
and the commit latency of small transactions."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import schemas
from infra.log import KafkaEventLog, TransactionalSession, replay
from infra.log.replay import REPLAY_FETCH
from infra.settings import Settings
from infra.topics import TopicNames
from tests.benchmarks.common import bench_settings, figure

PRODUCE_COUNT = 200_000
REPLAY_COUNT = 1_000_000
REPLAY_RUNS = 3
TRANSACTIONS = 200


def heartbeats(count: int) -> list:
    now = time.time()
    return [schemas.TaskHeartbeat(dag_id=f"etl_{index % 500}", run_id="scheduled__2026-11-30T02:00:00",
                                  task_id=f"task_{index % 37}", try_number=1, runner_id="r-8d1f", at=now + index)
            for index in range(count)]


def bench_produce(settings: Settings) -> None:
    events = heartbeats(PRODUCE_COUNT)
    with KafkaEventLog(settings, client_id="bench-produce") as log:
        log.append(events[0])
        log.flush()  # connection and producer id set up before timing
        started = time.perf_counter()
        for event in events:
            log.append(event)
        log.flush()
        elapsed = time.perf_counter() - started
    figure(f"produce {PRODUCE_COUNT:,} TaskHeartbeat (encode+partition+send, acks=all)",
           PRODUCE_COUNT / elapsed, "events/s", ">= 50,000")


def encoded_queued(count: int) -> list[bytes]:
    now = time.time()
    return [schemas.encode(schemas.TaskQueued(dag_id="etl_hourly", run_id=f"scheduled__{index}",
                                              task_id=f"task_{index % 37}", try_number=1, executor="local",
                                              queue="default", scheduler_id="sched-a", at=now + index))
            for index in range(count)]


def fill_partition(settings: Settings, partition: int, values: list[bytes]) -> None:
    """1M records in one partition, written fast by reusing a few distinct encoded values;
    what is measured afterwards is reading and decoding them."""
    topic = TopicNames(settings.topic_prefix)[schemas.EVENTS]
    producer = Producer({"bootstrap.servers": settings.bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 500_000,
                         "enable.idempotence": True, "acks": "all"})
    started = time.perf_counter()
    for index in range(REPLAY_COUNT):
        while True:
            try:
                producer.produce(topic, values[index % len(values)], b"etl_hourly", partition)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not write the replay data set")
    figure("(set-up) raw produce of 1M pre-encoded TaskQueued records",
           REPLAY_COUNT / (time.perf_counter() - started), "records/s")


def bench_replay(settings: Settings) -> None:
    values = encoded_queued(1000)
    fill_partition(settings, 0, values)
    topic = TopicNames(settings.topic_prefix)[schemas.EVENTS]
    figure("(breakdown) consume only, no decode (librdkafka -> Python)", raw_consume_rate(settings, topic),
           "records/s")
    figure("(breakdown) schemas.decode only, same values, no I/O", decode_rate(values * 200), "events/s")
    rates = []
    for _run in range(REPLAY_RUNS):
        started = time.perf_counter()
        count = sum(1 for _record in replay(settings, schemas.EVENTS, partitions=[0]))
        rates.append(count / (time.perf_counter() - started))
        assert count == REPLAY_COUNT, count
    figure(f"replay 1 partition of {REPLAY_COUNT:,} TaskQueued -> LogRecords, best of {REPLAY_RUNS}", max(rates),
           "events/s", ">= 200,000")
    print(f"    replay runs (events/s): {', '.join(f'{rate:,.0f}' for rate in rates)}", flush=True)


def decode_rate(values: list[bytes]) -> float:
    started = time.perf_counter()
    for value in values:
        schemas.decode(value)
    return len(values) / (time.perf_counter() - started)


def raw_consume_rate(settings: Settings, topic: str) -> float:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "bench-raw",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **REPLAY_FETCH})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    started = time.perf_counter()
    try:
        while count < REPLAY_COUNT:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    message.value()
                    count += 1
        return count / (time.perf_counter() - started)
    finally:
        consumer.close()


def bench_transactions(settings: Settings) -> None:
    session = TransactionalSession(settings, f"{settings.topic_prefix}bench")
    events = heartbeats(3)
    latencies = []
    try:
        session.commit(events, None)  # warm up: coordinator lookup, partitions added
        for _ in range(TRANSACTIONS):
            started = time.perf_counter()
            session.commit(events, None)
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        session.close()
    latencies.sort()
    figure(f"transaction of 3 events, commit latency median ({TRANSACTIONS} runs)",
           statistics.median(latencies), "ms")
    figure("transaction of 3 events, commit latency p99", latencies[int(len(latencies) * 0.99) - 1], "ms")


def drop_topics(settings: Settings) -> None:
    admin = AdminClient({"bootstrap.servers": settings.bootstrap, "log_level": 4})
    for future in admin.delete_topics(TopicNames(settings.topic_prefix).all).values():
        future.result()


def main() -> None:
    print(f"  machine load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          "(shared: figures vary with other work)", flush=True)
    with tempfile.TemporaryDirectory() as home:
        settings = bench_settings(Path(home), partitions=3)
        try:
            bench_produce(settings)
            bench_replay(settings)
            bench_transactions(settings)
        finally:
            drop_topics(settings)


if __name__ == "__main__":
    main()
