"""Deliveries: the runner's records that must reach the log, however long the broker is away.

An outcome is spooled to disk before it is appended and forgotten once the broker
acknowledged it. The runner's producer never gives up on a record (``message.timeout.ms``
0), so the only failures are permanent ones (the record is refused); those keep their
spool file and are logged as errors, and a later runner tries them again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message

from infra.log import KafkaEventLog, partition_for, routing_key
from infra.settings import Settings
from infra.topics import EVENTS_MAX_BYTES, topic_name
from schemas import DecodeError, decode
from schemas.codec import encode_record
from services.runner.core.claim import TryKey
from services.runner.every import Every
from services.runner.spool import Spool

log = logging.getLogger("tock.runner")

# The runner's producer: never drop a record; report each delivery (a handful per try), so
# an outcome's spool file goes as soon as it is acknowledged; send at once (linger 0), so
# the claim reads its TaskStarted back without a flush and an outcome leaves without delay.
RUNNER_PRODUCER = {"message.timeout.ms": 0, "delivery.report.only.error": False, "linger.ms": 0,
                   "message.max.bytes": EVENTS_MAX_BYTES}  # a success carries the try's values


class Deliveries:
    """Outcomes (and orphaned spool files) sent and not yet acknowledged."""

    def __init__(self, settings: Settings, events: KafkaEventLog, spool: Spool) -> None:
        self._settings, self._events, self._spool = settings, events, spool
        self.unacknowledged: dict[TryKey | Path, str] = {}  # an outcome's try, or a resent file -> what

    def send_outcome(self, key: TryKey, event: Any) -> None:
        """Spool the outcome of try ``key``, then append it."""
        value = self._encode(event)
        self._send(key, value, event, self._spool.keep(value))

    def send_command(self, event: Any) -> None:
        """Spool a command a try asked for (a TriggerDagRun), then append it; its spool file is its token."""
        value = self._encode(event)
        spooled = self._spool.keep(value)
        self._send(spooled, value, event, spooled)

    def resend_orphans(self) -> int:
        """Append again the spooled records of dead runners; how many."""
        orphans = self._spool.orphans()
        for orphan in orphans:
            try:
                self._send(orphan.path, orphan.value, decode(orphan.value), orphan.path)
            except DecodeError as error:
                log.error("spool file %s does not hold a Tock event (%s); left in place", orphan.path, error)
        if orphans:
            log.info("resending %d outcome(s) spooled by runners that died before their acknowledgement",
                     len(orphans))
        return len(orphans)

    def pending_tries(self) -> list[TryKey]:
        """Tries whose outcome the broker has not acknowledged yet (they keep heartbeating)."""
        return [token for token in self.unacknowledged if isinstance(token, tuple)]

    def wait(self, heartbeat: Callable[[list[TryKey]], None], every: float) -> None:
        """Until the broker acknowledged every record: heartbeat the tries whose outcome is pending."""
        beat, tell = Every(every), Every(30.0)
        while self._events.unacknowledged():
            self._events.producer.flush(max(0.01, min(beat.remaining(), tell.remaining())))
            if self.pending_tries() and beat.due():
                heartbeat(self.pending_tries())
            if self._events.unacknowledged() and tell.due():
                log.warning("waiting for the broker to acknowledge %d record(s): %s",
                            self._events.unacknowledged(), ", ".join(self.unacknowledged.values()) or "heartbeats")

    def _encode(self, event: Any) -> bytes:
        return encode_record(event, topic_name(self._settings.topic_prefix, event.TOPIC),
                             wire=self._settings.schema_registry_url is not None)

    def _send(self, token: TryKey | Path, value: bytes, event: Any, spooled: Path) -> None:
        key, partition_key = routing_key(event)
        self.unacknowledged[token] = f"{type(event).__name__} of {_brief(event)}"
        self._events.append_raw(event.TOPIC, value, key, partition_for(partition_key, self._settings.partitions),
                                on_delivery=self._on_delivery(token, spooled))
        self._events.producer.poll(0)

    def _on_delivery(self, token: TryKey | Path, spooled: Path) -> Callable[[KafkaError | None, Message], None]:
        def delivered(error: KafkaError | None, _message: Message) -> None:
            what = self.unacknowledged.pop(token, "a record")
            if error is None:
                self._spool.forget(spooled)
            else:
                log.error("%s was not delivered (%s); kept in %s for a later runner", what, error.str(), spooled)
        return delivered


def _brief(event: Any) -> str:
    if not hasattr(event, "try_number"):  # a command a try asked for
        return f"{event.dag_id} request {getattr(event, 'request_id', '')}"
    return f"{event.dag_id}/{event.run_id}/{event.task_id}#{event.try_number}"
