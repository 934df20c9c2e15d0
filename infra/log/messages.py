"""The messages Tock's consumers read, typed as they are once delivered.

confluent_kafka's stubs make a Message's topic(), partition() and offset() Optional, because one
Message class also carries client-level errors. A message a consumer returns for a partition (a
record, or a partition event such as _PARTITION_EOF) always has them; these wrappers say so once
per batch instead of checking each record on the hot path of every replay.
"""

from __future__ import annotations

from typing import Protocol, cast

from confluent_kafka import Consumer, KafkaError


class Consumed(Protocol):
    """A message a consumer returned: a record (``error()`` None) or a partition event."""

    def error(self) -> KafkaError | None: ...
    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...  # (timestamp type, milliseconds since epoch)


def consume(consumer: Consumer, max_records: int, timeout: float) -> list[Consumed]:
    """``consumer.consume()``: up to ``max_records`` messages, waiting at most ``timeout`` for the first."""
    return cast("list[Consumed]", consumer.consume(max_records, timeout))  # see the module docstring


def poll(consumer: Consumer, timeout: float) -> Consumed | None:
    """``consumer.poll()``: the next message, or None after ``timeout``."""
    return cast("Consumed | None", consumer.poll(timeout))  # see the module docstring
