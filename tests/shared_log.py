"""One KafkaEventLog per test and broker/topic prefix, reused by the helpers that append for the test
(publishing DAGs, triggering, appending commands, producing events to project).

A new idempotent producer waits about 0.5 s (sometimes 1 s) before it can deliver anything:
librdkafka retries its producer-id request on a 500 ms timer when the broker it learned from the
bootstrap is not connected yet. Each helper used to open its own producer and paid that wait on
every call. Each helper still flushes before it returns (every record acknowledged, or
DeliveryFailed), as closing did. tests/conftest.py closes the test's logs when it ends.
"""

from __future__ import annotations

from infra.log import KafkaEventLog
from infra.settings import Settings

_logs: dict[tuple[str, str, int], KafkaEventLog] = {}


def shared_event_log(settings: Settings) -> KafkaEventLog:
    """The test's producer for ``settings``' broker, topic prefix and partition count."""
    key = (settings.bootstrap, settings.topic_prefix, settings.partitions)
    if key not in _logs:
        _logs[key] = KafkaEventLog(settings, client_id="test-helpers")
    return _logs[key]


def close_shared_logs() -> None:
    """Close every producer the test opened (flushing what is left)."""
    logs = list(_logs.values())
    _logs.clear()
    for log in logs:
        log.close()
