"""EventReader: a read_committed consumer that yields decoded events and dead-letters the rest."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException, TopicPartition

from infra.log.closing import Closing
from infra.log.config import consumer_config
from infra.log.dead_letter import DeadLetterQueue
from infra.log.messages import Consumed, consume
from infra.log.records import LogRecord
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DecodeError, decode

log = logging.getLogger("tock.log")

# ... and a topic so fresh that the client's metadata does not list it or its partitions yet.
LEADERSHIP_CHANGES = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                       KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}

PartitionsCallback = Callable[[list[tuple[str, int]]], None]


class RawMessage(NamedTuple):
    """A record of a topic that is not Tock's, as it is."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: float

LEAVE_WAIT = 5.0  # seconds to hand partitions back before closing (the revocation is local: it takes ms)


class EventReader(Closing):
    """Reads events read_committed, either as a consumer-group member or from assigned partitions.

    With ``group_id`` it subscribes to the topics in that group (offsets are never auto
    committed: a TransactionalSession commits them); ``on_assign`` / ``on_revoke`` receive
    ``[(real topic, partition)]``. Without, call :meth:`assign`. ``config`` adds or
    overrides librdkafka settings (e.g. ``session.timeout.ms``).
    """

    def __init__(self, settings: Settings, logical_topics: list[str], *, group_id: str | None = None,
                 on_assign: PartitionsCallback | None = None, on_revoke: PartitionsCallback | None = None,
                 client_id: str = "tock", partition_eof: bool = False,
                 config: dict[str, Any] | None = None, foreign: bool = False) -> None:
        self._settings = settings
        self._on_assign, self._on_revoke = on_assign, on_revoke
        # librdkafka wants a group id even for assign(); a private one commits nothing.
        group = group_id or f"{client_id}-reader-{uuid.uuid4().hex}"
        options = {**consumer_config(settings, client_id, group), "enable.partition.eof": partition_eof,
                   **(config or {})}
        self.consumer = Consumer(options)
        self._positions: dict[tuple[str, int], int] = {}
        self.at_end: set[tuple[str, int]] = set()  # partitions at their end since their last record
        self._dead_letters = DeadLetterQueue(settings, client_id)
        self._subscribed = group_id is not None
        if group_id is not None:  # ``foreign``: topics that are not Tock's, named as they are (read with poll_raw)
            topics = list(logical_topics) if foreign else [topic_name(settings.topic_prefix, logical)
                                                           for logical in logical_topics]
            self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked,
                                    on_lost=self._revoked)

    def assign(self, assignments: list[tuple[str, int, int]]) -> None:
        """Read these (logical topic, partition, start offset); replaces any earlier assignment."""
        prefix = self._settings.topic_prefix
        self.consumer.assign([TopicPartition(topic_name(prefix, logical), partition, offset)
                              for logical, partition, offset in assignments])
        self._positions.clear()
        self.at_end.clear()

    def poll(self, timeout: float = 1.0, max_records: int = 1000) -> list[LogRecord]:
        """Up to ``max_records`` decoded records, waiting at most ``timeout`` seconds for the first."""
        records: list[LogRecord] = []
        positions, dead = self._positions, False
        append, at_end = records.append, self.at_end
        place: tuple[str, int] | None = None  # the (topic, partition) of the previous message
        # The hot loop of every replay: locals only, one pass, no per-record method calls
        # of ours, and one (topic, partition) tuple per run of messages from one partition.
        for message in consume(self.consumer, max_records, timeout):
            error = message.error()
            if error is not None:
                self._on_error(message, error)
                place = None
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if place is None or partition != place[1] or topic != place[0]:
                place = (topic, partition)
                at_end.discard(place)
            positions[place] = offset + 1
            value, key = message.value(), message.key()
            kind, stamp = message.timestamp()
            try:
                append(LogRecord(topic, partition, offset, None if key is None else key.decode(),
                                 None if value is None else decode(value), stamp / 1000.0,
                                 kind == TIMESTAMP_LOG_APPEND_TIME))
            except (DecodeError, UnicodeDecodeError) as failure:
                self._dead_letters.send(message, _reason(failure))
                dead = True
        if dead:
            self._dead_letters.flush()
        return records

    def poll_raw(self, timeout: float = 1.0, max_records: int = 1000) -> list[RawMessage]:
        """Up to ``max_records`` records as they are (of topics that are not Tock's: nothing is decoded),
        waiting at most ``timeout`` seconds for the first. A topic that does not exist yet is waited for."""
        found: list[RawMessage] = []
        for message in consume(self.consumer, max_records, timeout):
            error = message.error()
            if error is not None:
                if error.code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                    self._on_error(message, error)
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            self._positions[(topic, partition)] = offset + 1
            found.append(RawMessage(topic, partition, offset, message.key(), message.value(),
                                    message.timestamp()[1] / 1000.0))
        return found

    def rewind(self, positions: dict[tuple[str, int], int]) -> None:
        """Read again from these (real topic, partition) -> offset, those still assigned (a transaction
        that did not commit: its records are read again)."""
        assigned = {(part.topic, part.partition) for part in self.consumer.assignment()}
        for (topic, partition), offset in positions.items():
            if (topic, partition) in assigned:
                self.consumer.seek(TopicPartition(topic, partition, offset))
                self._positions[(topic, partition)] = offset

    def watermarks(self, topic: str, partition: int, timeout: float = 30.0, *, cached: bool = False) -> tuple[int, int]:
        """(low, high) watermarks of a real topic's partition, asked of the broker, waiting out transient
        states (a leader not yet elected after the topic was created or the broker restarted) up to
        ``timeout``. For a read_committed reader, high is the last stable offset."""
        return watermarks(self.consumer, TopicPartition(topic, partition), timeout, cached=cached)

    def cached_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """End offsets of (real topic, partition)s as last fetched, no broker call (for a
        read_committed reader, the last stable offset); those not known yet are left out."""
        ends: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            try:
                _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                ends[(topic, partition)] = high
        return ends

    def read_positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Where the reader is in each (real topic, partition): unlike :meth:`positions`, past the
        transaction markers after the last record (they take an offset but are never delivered)."""
        found = self.consumer.position([TopicPartition(topic, partition) for topic, partition in partitions])
        return {(part.topic, part.partition): part.offset for part in found if part.offset >= 0}

    def positions(self) -> dict[tuple[str, int], int]:
        """Next offset per (real topic, partition) consumed since assignment: what to commit."""
        return dict(self._positions)

    def close(self) -> None:
        try:
            self._dead_letters.close()
        finally:
            self._leave_group()
            self.consumer.close()

    def _leave_group(self) -> None:
        """Give the partitions back before closing. A revocation served inside ``close()`` calls the
        rebalance callback, whose rd_kafka_rebalance_protocol() can wait for ever on a consumer
        group that is shutting down (librdkafka#4041; seen once as a hung close in the suite).
        Unsubscribing and polling until the assignment is empty serves that callback first."""
        if not self._subscribed:
            return
        try:
            self.consumer.unsubscribe()
            deadline = time.monotonic() + LEAVE_WAIT
            while self.consumer.assignment() and time.monotonic() < deadline:
                self.consumer.poll(0.05)  # serves the revocation; records read now are dropped
        except (KafkaException, RuntimeError) as error:  # closing anyway
            log.debug("leaving the group before closing: %s", error)


    def _on_error(self, message: Consumed, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            self.at_end.add((message.topic(), message.partition()))
        elif error.fatal():
            raise KafkaException(error)
        else:
            log.warning("reading %s[%s]: %s", message.topic(), message.partition(), error)

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._on_assign is not None:
            self._on_assign([(tp.topic, tp.partition) for tp in partitions])

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._positions.pop((tp.topic, tp.partition), None)
            self.at_end.discard((tp.topic, tp.partition))
        if self._on_revoke is not None:
            self._on_revoke([(tp.topic, tp.partition) for tp in partitions])


def watermarks(consumer: Consumer, part: TopicPartition, timeout: float = 30.0, *,
               cached: bool = False) -> tuple[int, int]:
    """(low, high) watermarks of a partition, waiting out a leader not yet elected (a topic just
    created, a broker restarted) or moving, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(part, timeout=timeout, cached=cached)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            transient = error.retriable() or error.code() in LEADERSHIP_CHANGES
            if not transient or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _reason(error: Exception) -> str:
    if isinstance(error, UnicodeDecodeError):
        return f"record key is not UTF-8: {error}"
    return str(error)
