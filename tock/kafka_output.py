"""Transactional task output: records a try writes to Kafka topics that become visible only with its success.

Inside a try, ``get_current_context()["kafka_output"].produce(topic, value, key=None)`` (or the
``kafka_output`` argument of a ``@task`` function) keeps the record with the try. When the try succeeds,
its runner writes every kept record and the try's ``TaskSucceeded`` in one Kafka transaction: a consumer
reading with ``isolation.level=read_committed`` sees all of them once the success is in the log, and none of
a try that failed, was killed or died (its records never left its runner). Exactly-once effects for a task
whose sink is Kafka; any other sink a task writes to is still at least once, as in Airflow.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

MOST_RECORDS = 100_000
MOST_BYTES = 32 * 1024 * 1024  # keys and values of one try, kept in its runner's memory until the commit
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass
class KafkaOutput:
    """The records a running try will write with its success (the context's ``kafka_output``)."""

    records: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    size: int = 0

    def produce(self, topic: str, value: bytes | str, key: bytes | str | None = None) -> None:
        """Keep a record for ``topic`` (an existing topic; a str value or key is encoded as UTF-8). It is
        written, partitioned by its key as any Kafka producer does, in the transaction of the try's success."""
        if not isinstance(topic, str) or not _TOPIC.match(topic) or topic in (".", ".."):
            raise ValueError(f"kafka_output: a topic name is 1 to 249 letters, digits, '.', '_' or '-', "
                             f"got {topic!r:.80}")
        if topic.startswith("__"):
            raise ValueError(f"kafka_output: {topic!r} is one of Kafka's internal topics")
        encoded, encoded_key = _bytes(value, "value"), None if key is None else _bytes(key, "key")
        self.size += len(encoded) + len(encoded_key or b"")
        if len(self.records) >= MOST_RECORDS or self.size > MOST_BYTES:
            raise ValueError(f"kafka_output: a try writes at most {MOST_RECORDS:,} records and {MOST_BYTES:,} bytes "
                             "with its success")
        self.records.append((topic, encoded_key, encoded))

    def flush(self, timeout: float | None = None) -> int:
        """Nothing to wait for (the records go with the success); 0 records left, as a producer's flush says."""
        return 0

    def reported(self) -> list[list[str | None]]:
        """The records as the try's report carries them to its runner (base64 keys and values)."""
        return [[topic, None if key is None else base64.b64encode(key).decode(), base64.b64encode(value).decode()]
                for topic, key, value in self.records]


def _bytes(value: bytes | str, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"kafka_output: a record's {what} is bytes or str, got {type(value).__name__}")
