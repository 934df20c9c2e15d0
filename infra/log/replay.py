"""replay(): read partitions read_committed from their start (or given offsets) up to their end as it
stood when replay began."""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from infra.log.reader import EventReader
from infra.log.records import LogRecord
from infra.settings import Settings
from infra.topics import topic_name

_BATCH = 10_000
_WAIT = 0.02
# Large fetches: one partition is read as fast as it can be decoded, not a megabyte per round trip.
REPLAY_FETCH = {"max.partition.fetch.bytes": 32 * 1024 * 1024, "fetch.max.bytes": 64 * 1024 * 1024}


def replay(settings: Settings, logical_topic: str, partitions: list[int] | None = None, *,
           client_id: str = "tock-replay", timeout: float = 30.0,
           start: dict[int, int] | None = None) -> Iterator[LogRecord]:
    """Every committed record of ``partitions`` (default: all) up to the end offsets taken at the start,
    from offset ``start[partition]`` where given (e.g. where a snapshot ends), else from the beginning.

    Records written after replay began are not returned, so replay always ends, even
    while producers keep writing. Undecodable records go to the dead-letter topic.
    """
    topic = topic_name(settings.topic_prefix, logical_topic)
    reader = EventReader(settings, [], client_id=client_id, partition_eof=True, config=REPLAY_FETCH)
    try:
        start = start or {}
        ends = _end_offsets(reader, topic, partitions, timeout, start)
        reader.assign([(logical_topic, partition, start.get(partition, OFFSET_BEGINNING)) for partition in ends])
        while ends:
            # A short wait: consume() blocks until a full batch or the timeout, and the
            # tail of a partition never fills a batch; the loop ends at the end offsets.
            records = reader.poll(_WAIT, _BATCH)
            yield from [record for record in records if record.offset < ends.get(record.partition, -1)]
            _finish_reached(reader, topic, ends)
    finally:
        reader.close()


def _end_offsets(reader: EventReader, topic: str, partitions: list[int] | None,
                 timeout: float, start: dict[int, int]) -> dict[int, int]:
    """High watermark of each non-empty partition. Records of a transaction still open below it
    are read if it commits before the reader reaches them; the end of the log (partition EOF,
    at the last stable offset for read_committed) also ends a partition, so replay never waits
    on a transaction that stays open."""
    if partitions is None:
        partitions = topic_partitions(reader, topic, timeout)
    ends = {}
    for partition in partitions:
        low, high = reader.watermarks(topic, partition, timeout)
        if high > max(low, start.get(partition, 0)):
            ends[partition] = high
    return ends


def topic_partitions(reader: EventReader, topic: str, timeout: float = 30.0) -> list[int]:
    """The partitions of ``topic``, waiting out a topic so fresh that the broker answering does not
    know it yet (UNKNOWN_TOPIC_OR_PART, or no leader yet) for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        metadata = reader.consumer.list_topics(topic, timeout=timeout).topics[topic]
        ready = metadata.error is None and metadata.partitions and all(
            part.error is None and part.leader >= 0 for part in metadata.partitions.values())
        if ready:
            return sorted(metadata.partitions)
        if time.monotonic() > deadline:
            raise RuntimeError(f"cannot replay {topic}: {metadata.error or 'partitions without a leader'} "
                               f"after {timeout:g} s (does the topic exist? `tock topics create` creates it)")
        time.sleep(0.1)


def settle(settings: Settings, logical_topic: str, partitions: list[int], *, timeout: float,
           client_id: str = "tock-settle", group_id: str | None = None) -> None:
    """Wait until no transaction that was open when this was called still holds back ``partitions``.

    A read_committed reader sees a partition only up to its last stable offset (LSO); a
    transaction left open by a previous owner (frozen, or killed inside it) keeps the LSO
    below the high watermark until it commits or the coordinator aborts it. Deciding before
    then would miss decisions that may still commit. Waits until each partition's LSO reaches
    the high watermark captured on entry; raises TimeoutError past ``timeout`` (for each wait).

    The watermarks only show records that reached the partition. A previous owner frozen
    after sending its offsets may still hold its records in its producer's queue, and write
    and commit them when it thaws. With ``group_id`` (the group whose offsets such a
    transaction carries), first wait until the group's offsets for ``partitions`` are stable:
    a read_committed offset fetch is answered UNSTABLE_OFFSET_COMMIT (and retried) while a
    transaction holding offsets for them is open (KIP-447).
    """
    topic = topic_name(settings.topic_prefix, logical_topic)
    if group_id is not None:
        _wait_for_stable_offsets(settings, topic, partitions, group_id, timeout, client_id)
    uncommitted = EventReader(settings, [], client_id=client_id, config={"isolation.level": "read_uncommitted"})
    committed = EventReader(settings, [], client_id=client_id)
    try:
        targets = {partition: uncommitted.watermarks(topic, partition, timeout)[1] for partition in partitions}
        deadline = time.monotonic() + timeout
        while targets:
            targets = {partition: high for partition, high in targets.items()
                       if committed.watermarks(topic, partition, timeout, cached=False)[1] < high}
            if targets and time.monotonic() > deadline:
                raise TimeoutError(f"{topic} partitions {sorted(targets)} still hold an open transaction "
                                   f"after {timeout:g} s")
            if targets:
                time.sleep(_SETTLE_WAIT)
    finally:
        uncommitted.close()
        committed.close()


_SETTLE_WAIT = 0.05


def _wait_for_stable_offsets(settings: Settings, topic: str, partitions: list[int], group_id: str,
                             timeout: float, client_id: str) -> None:
    # An assigned (never subscribed) reader in the group: it fetches offsets, never joins.
    reader = EventReader(settings, [], client_id=client_id, config={"group.id": group_id})
    try:
        reader.consumer.committed([TopicPartition(topic, partition) for partition in partitions], timeout=timeout)
    except KafkaException as error:
        raise TimeoutError(f"{topic} partitions {sorted(partitions)}: offsets of group {group_id} still held by "
                           f"an open transaction after {timeout:g} s ({error.args[0]})") from None
    finally:
        reader.close()


def _finish_reached(reader: EventReader, topic: str, ends: dict[int, int]) -> None:
    # A partition is done when the reader's position reached its end offset, or the reader
    # hit the end of the log (aborted records and transaction markers have no record to see).
    positions = reader.positions()
    done = [partition for partition, end in ends.items()
            if positions.get((topic, partition), 0) >= end or (topic, partition) in reader.at_end]
    for partition in done:
        del ends[partition]
    if done:
        reader.consumer.pause([TopicPartition(topic, partition) for partition in done])
