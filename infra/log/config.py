"""librdkafka configuration shared by Tock's producers and consumers, and how their errors are logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from infra.registry import attach
from infra.settings import Settings

log = logging.getLogger("tock.log")

# Connection trouble the client recovers from by itself once the broker is back.
_TRANSIENT = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE,
              KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT}


def error_logger(client_id: str, every: float = 10.0) -> Callable[[KafkaError], None]:
    """An ``error_cb`` that says clearly what is wrong with the broker connection and keeps going.

    librdkafka reports every failed reconnect; an outage is logged once per ``every`` seconds.
    """
    last_outage_log = -every

    def on_error(error: KafkaError) -> None:
        nonlocal last_outage_log
        if error.fatal():
            log.error("kafka client %s: fatal error %s; it must be restarted", client_id, error)
        elif error.code() not in _TRANSIENT:
            log.warning("kafka client %s: %s", client_id, error)
        elif time.monotonic() - last_outage_log >= every:
            last_outage_log = time.monotonic()
            log.warning("kafka client %s: broker unreachable or slow (%s); retrying", client_id, error.str())

    return on_error


class OncePerInterval(logging.Filter):
    """Lets a given librdkafka log line through once per ``every`` seconds per client.

    During an outage librdkafka logs every failed reconnect of every client (FAIL,
    REQTMOUT, ...); error_cb already says the broker is unreachable, so repeats are noise.
    """

    def __init__(self, every: float = 10.0) -> None:
        super().__init__()
        self.every = every
        self.last_seen: dict[tuple[str, ...], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        key = tuple(str(arg)[:60] for arg in args[:2]) or (record.msg[:60],)
        now = time.monotonic()
        if now - self.last_seen.get(key, -self.every) < self.every:
            return False
        self.last_seen[key] = now
        return True


LIBRDKAFKA_LOG = logging.getLogger("tock.kafka")
LIBRDKAFKA_LOG.addFilter(OncePerInterval())


def common_config(settings: Settings, client_id: str) -> dict[str, Any]:
    # Every client of Tock's topics is made here: the codec learns the deployment's schema registry.
    attach(settings)
    # librdkafka's own log lines go through logging too, instead of raw to stderr.
    return {"bootstrap.servers": settings.bootstrap, "client.id": client_id,
            "error_cb": error_logger(client_id), "logger": LIBRDKAFKA_LOG}


def producer_config(settings: Settings, client_id: str) -> dict[str, Any]:
    """Idempotent, acks=all, small linger so batches form without delaying a lone record much."""
    return {
        **common_config(settings, client_id),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "compression.type": "lz4",
        # Only failures call back: a per-record Python callback would halve throughput.
        "delivery.report.only.error": True,
    }


def consumer_config(settings: Settings, client_id: str, group_id: str) -> dict[str, Any]:
    """read_committed, no auto commit (offsets are committed in transactions), earliest by default."""
    return {
        **common_config(settings, client_id),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
