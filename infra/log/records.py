"""What the log holds: a decoded record, and which key and partition key an event is written under."""

from __future__ import annotations

from typing import Any, NamedTuple

from schemas.declare import HEARTBEATS, LOGS
from schemas.logs import try_log_key


class LogRecord(NamedTuple):
    """One record read from the log, its value decoded to the current event declaration.

    A named tuple rather than a frozen dataclass: it is built once per record on every
    replay, and a tuple is immutable at a quarter of the cost.
    """

    topic: str  # real topic name (with prefix)
    partition: int
    offset: int
    key: str | None
    event: Any | None  # None for a tombstone
    timestamp: float  # record timestamp, seconds since epoch


def routing_key(event: Any) -> tuple[str, str]:
    """(record key, partition key) of an event.

    The partition key is the dag_id wherever there is one, so partition p of every
    scheduling topic concerns the same DAGs. Heartbeats are keyed by task instance so
    compaction keeps the latest per try's task; log lines by try; parsing events without a DAG are
    keyed by file; scheduler liveness by scheduler; accounts and tokens by user name; worker liveness by ``worker/<name>``
    (beside the schedulers' in ``tock.schedulers``, so a worker named like a scheduler is apart).
    """
    dag_id = getattr(event, "dag_id", None)
    if dag_id is not None:
        if event.TOPIC == HEARTBEATS:
            return f"{dag_id}|{event.run_id}|{event.task_id}", dag_id
        if event.TOPIC == LOGS:  # a try's log lines: keyed by the try
            return try_log_key(dag_id, event.run_id, event.task_id, event.try_number), dag_id
        return dag_id, dag_id
    worker = getattr(event, "worker", None)
    if worker is not None:
        return f"worker/{worker}", f"worker/{worker}"
    for attribute in ("file_path", "scheduler_id", "username"):
        value = getattr(event, attribute, None)
        if value is not None:
            return value, value
    raise TypeError(f"{type(event).__name__} has no dag_id, worker, file_path or scheduler_id to route it by; "
                    "pass key= and partition_key= explicitly")
