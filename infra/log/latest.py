"""latest_value() / newest_values(): the newest committed value of some keys in one partition, read
from the end (or an offset) backwards.

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
    found = newest_values(settings, logical_topic, partition, {key}, client_id=client_id, timeout=timeout).get(key)
    if found is None or found[1] is None:
        return None
    return found[0], found[1]


def newest_values(settings: Settings, logical_topic: str, partition: int, keys: set[str], *,
                  before: int | None = None, client_id: str = "tock-latest",
                  timeout: float = 30.0) -> dict[str, tuple[int, bytes | None]]:
    """key -> (offset, value) of the newest committed record of each of ``keys`` in ``partition`` before
    offset ``before`` (default: the end), a tombstone's value None; keys with no record are left out.
    Reads back from ``before`` in growing windows, the first as wide as there are keys (and a
    transaction's markers), until every key is found or the partition's start is reached."""
    topic = topic_name(settings.topic_prefix, logical_topic)
    consumer = Consumer({**consumer_config(settings, client_id, f"{client_id}-{uuid.uuid4().hex}"),
                         "enable.partition.eof": True, **SNAPSHOT_FETCH})
    wanted = {key.encode(): key for key in keys}
    found: dict[bytes, tuple[int, bytes | None]] = {}
    try:
        low, high = watermarks(consumer, TopicPartition(topic, partition), timeout)
        end = high if before is None else min(before, high)
        window = len(keys) + FIRST_WINDOW
        while end > low and len(found) < len(keys):
            start = max(low, end - window)
            newer = _newest_between(consumer, topic, partition, set(wanted) - set(found), start, end, timeout)
            found.update(newer)
            end, window = start, window * WINDOW_GROWTH
        return {wanted[key]: value for key, value in found.items()}
    finally:
        consumer.close()


def _newest_between(consumer: Consumer, topic: str, partition: int, keys: set[bytes], start: int, end: int,
                    timeout: float) -> dict[bytes, tuple[int, bytes | None]]:
    """The newest (offset, value) of each of ``keys`` in [start, end), reading read_committed up to the end."""
    consumer.assign([TopicPartition(topic, partition, start)])
    found: dict[bytes, tuple[int, bytes | None]] = {}
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
        key = message.key()
        if key in keys:
            found[key] = (message.offset(), message.value())
    raise TimeoutError(f"reading {topic}[{partition}] from offset {start} did not reach {end} in {timeout:g} s")
