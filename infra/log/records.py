"""What the log holds: a decoded record, and which key and partition key an event is written under."""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from schemas import Event, EventBase

Routed = TypeVar("Routed", bound=EventBase)


class LogRecord(NamedTuple):
    """One record read from the log, its value decoded to the current event declaration.

    A named tuple rather than a frozen dataclass: it is built once per record on every
    replay, and a tuple is immutable at a quarter of the cost.
    """

    topic: str  # real topic name (with prefix)
    partition: int
    offset: int
    key: str | None
    event: Event | None  # None for a tombstone
    timestamp: float  # record timestamp, seconds since epoch
    log_append_time: bool = False  # the timestamp is the broker's (LogAppendTime), not the producer's clock

    @property
    def appended_at(self) -> float | None:
        """When the broker appended the record, by the broker's clock; None if the record carries its
        producer's clock instead (CreateTime: a topic created before Tock set LogAppendTime on it)."""
        return self.timestamp if self.log_append_time else None


def routing_key(event: Event) -> tuple[str, str]:
    """(record key, partition key) of an event, by the route its declaration names (schemas/routing.py).

    The partition key is the dag_id wherever there is one, so partition p of every scheduling
    topic concerns the same DAGs. Heartbeats are keyed by task instance (compaction keeps the
    latest per task instance), log lines by try, parsing events without a DAG by file, scheduler
    liveness by scheduler, accounts and tokens by user name, worker liveness by ``worker/<name>``
    (beside the schedulers' in ``tock.schedulers``, so a worker named like a scheduler is apart).
    """
    if not isinstance(event, EventBase):  # a value that is no declared event: nothing routes it
        raise TypeError(f"{type(event).__name__} is not a declared event, so it has no dag_id, worker, file_path or "
                        "scheduler_id to route it by; pass key= and partition_key= explicitly")
    return _declared_keys(event)


def _declared_keys(event: Routed) -> tuple[str, str]:
    # Generic in the event's class: its ROUTE reads exactly the fields that class declares.
    return type(event).ROUTE.keys(event)
