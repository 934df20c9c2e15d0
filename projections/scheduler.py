"""Read model ``scheduler``: each scheduler instance's liveness, from ``tock.schedulers``."""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json
from schemas import SchedulerHeartbeat, SchedulerStopped

TABLE = "scheduler"


def empty(scheduler_id: str) -> Row:
    return {"scheduler_id": scheduler_id, "hostname": None, "pid": None, "partitions_json": "[]",
            "state": None, "first_seen": None, "last_heartbeat": None, "stopped_at": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.scheduler_id,) if isinstance(event, (SchedulerHeartbeat, SchedulerStopped)) else None


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = row or empty(event.scheduler_id)
    match event:
        case SchedulerHeartbeat():
            return {**row, "hostname": event.hostname, "pid": event.pid, "state": "alive",
                    "partitions_json": as_json(sorted(event.partitions)), "last_heartbeat": event.at,
                    "first_seen": row["first_seen"] or event.at, "stopped_at": None}
        case SchedulerStopped():
            return {**row, "state": "stopped", "partitions_json": "[]", "stopped_at": event.at}
    raise TypeError(f"scheduler read model cannot apply {type(event).__name__}")
