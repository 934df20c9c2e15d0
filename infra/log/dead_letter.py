"""Records that cannot be decoded go to ``tock.dead-letter`` with the reason, and reading goes on.

A dead letter keeps the original key and value bytes; headers say why and where it came from.
It lands in the same partition number as its source (modulo the partition count), so
partition p of the dead-letter topic still concerns the DAGs of partition p.
"""

from __future__ import annotations

import logging

from confluent_kafka import Message, Producer

from infra.log.config import producer_config
from infra.log.producer import DeliveryFailed, produce
from infra.settings import Settings
from infra.topics import topic_name
from schemas.declare import DEAD_LETTER

log = logging.getLogger("tock.log")


def dead_letter_headers(reason: str, message: Message) -> list[tuple[str, bytes]]:
    return [("reason", reason.encode("utf-8")),
            ("source.topic", message.topic().encode("utf-8")),
            ("source.partition", str(message.partition()).encode("ascii")),
            ("source.offset", str(message.offset()).encode("ascii"))]


class DeadLetterQueue:
    """Writes undecodable records aside; created lazily since most readers never need it."""

    def __init__(self, settings: Settings, client_id: str) -> None:
        self._settings = settings
        self._client_id = f"{client_id}-dead-letter"
        self._producer: Producer | None = None
        self._failures: list[str] = []

    def send(self, message: Message, reason: str) -> None:
        log.warning("dead letter from %s[%d]@%d: %s", message.topic(), message.partition(),
                    message.offset(), reason)
        topic = topic_name(self._settings.topic_prefix, DEAD_LETTER)
        partition = message.partition() % self._settings.partitions
        produce(self._client(), topic, message.value(), message.key(), partition,
                headers=dead_letter_headers(reason, message))

    def flush(self, timeout: float = 30.0) -> None:
        """Make the dead letters durable before the reader's position moves past them."""
        if self._producer is None:
            return
        remaining = self._producer.flush(timeout)
        failures, self._failures = self._failures, []
        if remaining or failures:
            raise DeliveryFailed(f"dead letters not delivered: {remaining} pending; {'; '.join(failures)}")

    def close(self) -> None:
        if self._producer is None:
            return
        try:
            self.flush()
        except DeliveryFailed:
            self._producer.purge()
            raise
        finally:
            self._producer.close()
            self._producer = None

    def _client(self) -> Producer:
        if self._producer is None:
            config = producer_config(self._settings, self._client_id)
            self._producer = Producer({**config, "on_delivery": self._on_delivery})
        return self._producer

    def _on_delivery(self, error, message: Message) -> None:
        if error is not None:
            self._failures.append(f"{message.topic()}[{message.partition()}]: {error.str()}")
