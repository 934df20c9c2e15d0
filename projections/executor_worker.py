"""Read model ``executor_worker``: each executor worker's liveness, from ``tock.schedulers``.

One row per worker name: the executor and queues it last said it serves, its concurrency,
its last heartbeat, and when it stopped cleanly (cleared by a later heartbeat: it came
back). Whether a silent worker is still alive is judged when read, as for schedulers.
"""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json
from schemas import WorkerHeartbeat, WorkerStopped

TABLE = "executor_worker"


def empty(worker: str, executor: str) -> Row:
    return {"worker": worker, "executor": executor, "hostname": None, "pid": None, "queues_json": "[]",
            "concurrency": None, "first_seen": None, "last_heartbeat": None, "stopped_at": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.worker,) if isinstance(event, (WorkerHeartbeat, WorkerStopped)) else None


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = row or empty(event.worker, event.executor)
    match event:
        case WorkerHeartbeat():
            return {**row, "executor": event.executor, "hostname": event.hostname, "pid": event.pid,
                    "queues_json": as_json(sorted(event.queues)), "concurrency": event.concurrency,
                    "first_seen": row["first_seen"] or event.at, "last_heartbeat": event.at, "stopped_at": None}
        case WorkerStopped():
            return {**row, "executor": event.executor, "stopped_at": event.at}
    raise TypeError(f"executor_worker read model cannot apply {type(event).__name__}")
