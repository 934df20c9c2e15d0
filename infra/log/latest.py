"""latest_value(): the newest committed value of one key in one partition, read from the end backwards.

For compacted topics holding one record per key and partition (scheduler snapshots): compaction
keeps the partition short in the end, but its active segment may hold many superseded values,
each megabytes. Reading a growing window back from the end finds the newest without reading them.
Values are raw bytes: nothing here decodes them (they are not Tock events).
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from infra.log.config import consumer_config
from infra.log.messages import poll
from infra.log.reader import watermarks
from infra.settings import Settings
from infra.topics import topic_name

FIRST_WINDOW = 8  # offsets: one transaction writes a record and its commit marker
WINDOW_GROWTH = 16
SNAPSHOT_FETCH = {"max.partition.fetch.bytes": 64 * 1024 * 1024, "fetch.max.bytes": 128 * 1024 * 1024,
                  "receive.message.max.bytes": 130 * 1024 * 1024}


def latest_value(settings: Settings, logical_topic: str, partition: int, key: str, *,
                 client_id: str = "tock-latest", timeout: float = 30.0) -> tuple[int, bytes] | None:
    """(offset, value) of the newest committed record of ``key`` in ``partition``, None if there is none
    (a tombstone counts as none)."""
    topic = topic_name(settings.topic_prefix, logical_topic)
    consumer = Consumer({**consumer_config(settings, client_id, f"{client_id}-{uuid.uuid4().hex}"),
                         "enable.partition.eof": True, **SNAPSHOT_FETCH})
    try:
        low, high = watermarks(consumer, TopicPartition(topic, partition), timeout)
        window = FIRST_WINDOW
        while high > low:
            start = max(low, high - window)
            found = _newest_between(consumer, topic, partition, key, start, high, timeout)
            if found is not None:
                offset, value = found
                return None if value is None else (offset, value)
            if start == low:
                return None
            window *= WINDOW_GROWTH
        return None
    finally:
        consumer.close()


def _newest_between(consumer: Consumer, topic: str, partition: int, key: str, start: int, end: int,
                    timeout: float) -> tuple[int, bytes | None] | None:
    """The newest (offset, value) of ``key`` in [start, end), reading read_committed up to the end."""
    consumer.assign([TopicPartition(topic, partition, start)])
    wanted, found = key.encode(), None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = poll(consumer, 0.2)
        if message is None:
            continue
        error = message.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            return found
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            continue
        if message.offset() >= end:
            return found
        if message.key() == wanted:
            found = (message.offset(), message.value())
    raise TimeoutError(f"reading {topic}[{partition}] from offset {start} did not reach {end} in {timeout:g} s")

