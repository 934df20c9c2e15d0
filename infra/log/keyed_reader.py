"""KeyedPartitionReader: one key's records in one partition of a topic, from a point in time on.

Reads read_committed from the first offset whose timestamp is at or after ``since``
(``offsets_for_times``), drops other keys' records before decoding them, and says how far
it has read against the partition's end, so a caller can stop "at the end as of now".
"""

from __future__ import annotations

import logging
import uuid

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from infra.log.closing import Closing
from infra.log.config import consumer_config
from infra.log.messages import consume
from infra.log.records import LogRecord
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DecodeError, decode

log = logging.getLogger("tock.log")


class KeyedPartitionReader(Closing):
    """The records keyed ``key`` in ``partition`` of a logical topic, written at or after ``since``."""

    def __init__(self, settings: Settings, logical_topic: str, partition: int, key: str, since: float,
                 timeout: float = 30.0) -> None:
        self._key, self._timeout = key.encode(), timeout
        self._partition = TopicPartition(topic_name(settings.topic_prefix, logical_topic), partition)
        self.consumer = Consumer({**consumer_config(settings, "tock-log-reader", f"tock-log-reader-{uuid.uuid4().hex}"),
                                  "enable.partition.eof": False})
        self.next_offset = self._start(since)
        self.consumer.assign([TopicPartition(self._partition.topic, partition, self.next_offset)])

    def poll(self, timeout: float, max_records: int = 500) -> list[LogRecord]:
        """This key's records among the next ``max_records``, waiting at most ``timeout`` for the first."""
        records: list[LogRecord] = []
        for message in consume(self.consumer, max_records, timeout):
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                continue
            self.next_offset = message.offset() + 1
            if message.key() == self._key:
                kind, stamp = message.timestamp()
                try:
                    records.append(LogRecord(message.topic(), message.partition(), message.offset(),
                                             self._key.decode(), decode(message.value()), stamp / 1000.0,
                                             kind == TIMESTAMP_LOG_APPEND_TIME))
                except DecodeError as failure:  # one bad record costs that record, not the read
                    log.warning("%s[%s]@%s skipped: %s", message.topic(), message.partition(), message.offset(),
                                failure)
        self._advance_past_control_records()
        return records

    def end(self) -> int:
        """The partition's end now (for read_committed: its last stable offset)."""
        return self._watermarks()[1]

    def _start(self, since: float) -> int:
        # The end first: a record written between the two questions is then read, not skipped.
        end = self.end()
        query = TopicPartition(self._partition.topic, self._partition.partition, max(0, int(since * 1000)))
        found = self.consumer.offsets_for_times([query], timeout=self._timeout)[0]
        if found.error is not None:
            raise KafkaException(found.error)
        return end if found.offset < 0 else found.offset

    def _advance_past_control_records(self) -> None:
        # A transaction marker takes an offset but is never delivered: the position moves past it.
        position = self.consumer.position([self._partition])[0].offset
        if position != OFFSET_INVALID and position > self.next_offset:
            self.next_offset = position

    def _watermarks(self) -> tuple[int, int]:
        try:
            return self.consumer.get_watermark_offsets(self._partition, timeout=self._timeout)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            raise KafkaException(KafkaError(error.code(), f"reading the end of {self._partition.topic}"
                                            f"[{self._partition.partition}]: {error.str()}")) from None

    def close(self) -> None:
        self.consumer.close()
