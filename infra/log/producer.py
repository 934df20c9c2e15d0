"""KafkaEventLog: appends events to their topics, each in the partition of its partition key."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from infra.log.closing import Closing
from infra.log.config import producer_config
from infra.log.partitioner import partition_for
from infra.log.records import routing_key
from infra.settings import Settings
from infra.topics import topic_name
from schemas import Event
from schemas.codec import encode_record

log = logging.getLogger("tock.log")

DeliveryCallback = Callable[[KafkaError | None, Message], None]
Headers = list[tuple[str, str | bytes | None]]


class DeliveryFailed(RuntimeError):
    """Records the broker did not acknowledge; the message names them and why."""


def produce(producer: Producer, topic: str, value: bytes | None, key: str | bytes | None, partition: int, *,
            headers: Headers | None = None, on_delivery: DeliveryCallback | None = None) -> None:
    """Produce one record, waiting for room in the client's queue when it is full. ``on_delivery``
    None keeps the producer's own report (a None given to librdkafka would replace it)."""
    while True:
        try:
            if on_delivery is None:
                producer.produce(topic, value, key, partition, headers=headers)
            else:
                producer.produce(topic, value, key, partition, on_delivery=on_delivery, headers=headers)
            return
        except BufferError:
            # The local queue is full: serve delivery reports until batches drain.
            producer.poll(0.05)


def produce_event(producer: Producer, settings: Settings, event: Event, key: str | None = None,
                  partition_key: str | None = None, *, on_delivery: DeliveryCallback | None = None) -> None:
    """Produce ``event`` on its topic, in the partition of its partition key (defaults: routing_key)."""
    if key is None or partition_key is None:
        default_key, default_partition_key = routing_key(event)
        key = default_key if key is None else key
        partition_key = default_partition_key if partition_key is None else partition_key
    topic = topic_name(settings.topic_prefix, event.TOPIC)
    produce(producer, topic, encode_record(event, topic, wire=settings.schema_registry_url is not None), key,
            partition_for(partition_key, settings.partitions), on_delivery=on_delivery)


class KafkaEventLog(Closing):
    """An idempotent (acks=all) batching producer of Tock events.

    ``config`` adds or overrides librdkafka settings (the runner's: ``message.timeout.ms`` 0,
    never give up on a record). ``on_delivery(error, message)`` given to an append replaces
    the default report for that record; with the default ``delivery.report.only.error`` it
    is called on failure only.
    """

    def __init__(self, settings: Settings, *, client_id: str = "tock", config: dict[str, Any] | None = None) -> None:
        self._settings = settings
        self._failures: list[str] = []
        self.producer = Producer({**producer_config(settings, client_id), "on_delivery": self._on_delivery,
                                  **(config or {})})

    def append(self, event: Event, *, key: str | None = None, partition_key: str | None = None,
               on_delivery: DeliveryCallback | None = None) -> None:
        """Queue ``event`` on its topic; keys default to :func:`routing_key`. See :meth:`flush`."""
        produce_event(self.producer, self._settings, event, key, partition_key, on_delivery=on_delivery)
        self.producer.poll(0)  # serve error and log callbacks (broker down...) as we go, not only at flush

    def append_raw(self, logical_topic: str, value: bytes | None, key: str | bytes | None, partition: int,
                   headers: Headers | None = None, on_delivery: DeliveryCallback | None = None) -> None:
        """Queue an already encoded value in a given partition (dead letters, spooled outcomes, tests)."""
        topic = topic_name(self._settings.topic_prefix, logical_topic)
        produce(self.producer, topic, value, key, partition, headers=headers, on_delivery=on_delivery)

    def unacknowledged(self) -> int:
        """Records queued or in flight, not yet acknowledged (nor failed)."""
        return len(self.producer)

    def tombstone(self, logical_topic: str, key: str, partition_key: str | None = None) -> None:
        """Queue a tombstone for ``key`` (compaction then forgets it)."""
        partition = partition_for(key if partition_key is None else partition_key, self._settings.partitions)
        self.append_raw(logical_topic, None, key, partition)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued record is acknowledged; raise DeliveryFailed naming the failures."""
        remaining = self.producer.flush(timeout)
        failures, self._failures = self._failures, []
        if remaining:
            failures.append(f"{remaining} record(s) still unacknowledged after {timeout}s (is the broker up?)")
        if failures:
            raise DeliveryFailed(f"{len(failures)} delivery failure(s): " + "; ".join(failures[:10]))

    def close(self, timeout: float = 30.0) -> None:
        """Flush, then close the client. Records still unacknowledged after ``timeout`` are dropped
        and named by the DeliveryFailed this raises (closing would otherwise wait for them)."""
        try:
            self.flush(timeout)
        except DeliveryFailed:
            self.producer.purge()
            raise
        finally:
            self.producer.close()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failure = f"{message.topic()}[{message.partition()}] key={message.key()!r}: {error.str()}"
            log.error("record not delivered: %s", failure)
            self._failures.append(failure)
