"""Records that cannot be decoded go to ``tock.dead-letter`` with the reason, and reading goes on.

A dead letter keeps the original key and value bytes; headers say why and where it came from.
It lands in the same partition number as its source (modulo the partition count), so
partition p of the dead-letter topic still concerns the DAGs of partition p.
"""

from __future__ import annotations

import logging

from infra.log.messages import Consumed
from infra.log.producer import Headers, KafkaEventLog
from infra.settings import Settings
from schemas.declare import DEAD_LETTER

log = logging.getLogger("tock.log")


def dead_letter_headers(reason: str, topic: str, partition: int, offset: int) -> Headers:
    return [("reason", reason.encode("utf-8")),
            ("source.topic", topic.encode("utf-8")),
            ("source.partition", str(partition).encode("ascii")),
            ("source.offset", str(offset).encode("ascii"))]


class DeadLetterQueue:
    """Writes undecodable records aside; its producer is created lazily since most readers never need it."""

    def __init__(self, settings: Settings, client_id: str) -> None:
        self._settings = settings
        self._client_id = f"{client_id}-dead-letter"
        self._event_log: KafkaEventLog | None = None

    def send(self, message: Consumed, reason: str) -> None:
        """Set aside a record as read from Kafka, its bytes as they were."""
        self.send_value(message.value(), message.key(), message.topic(), message.partition(), message.offset(),
                        reason)

    def send_value(self, value: bytes | None, key: str | bytes | None, topic: str, partition: int, offset: int,
                   reason: str) -> None:
        """Set aside a record's value, naming where it came from (topic, partition, offset) and why."""
        log.warning("dead letter from %s[%d]@%d: %s", topic, partition, offset, reason)
        if self._event_log is None:
            self._event_log = KafkaEventLog(self._settings, client_id=self._client_id)
        self._event_log.append_raw(DEAD_LETTER, value, key, partition % self._settings.partitions,
                                   headers=dead_letter_headers(reason, topic, partition, offset))

    def flush(self, timeout: float = 30.0) -> None:
        """Make the dead letters durable before the reader's position moves past them."""
        if self._event_log is not None:
            self._event_log.flush(timeout)

    def close(self) -> None:
        if self._event_log is not None:
            event_log, self._event_log = self._event_log, None
            event_log.close()
