"""Read model ``dag_run``: one row per run, from ``tock.events`` (ordered per DAG).

A cleared finished run reopens (``DagRunReopened``): running again, its end and reason
cleared, ``reopened_at`` set; ``DagRunFinished`` ends it again.
"""

from __future__ import annotations

from projections.records import Key, Record, Row
from schemas import DagRunCreated, DagRunFinished, DagRunReopened, DeadlineMissed

TABLE = "dag_run"
_EVENTS = (DagRunCreated, DagRunFinished, DagRunReopened, DeadlineMissed)


def empty(dag_id: str, run_id: str) -> Row:
    return {"dag_id": dag_id, "run_id": run_id, "state": None, "run_type": None,
            "logical_date": None, "conf_json": "{}", "dag_fingerprint": None, "scheduler_id": None,
            "created_at": None, "end_date": None, "reason": None, "reopened_at": None, "deadline_missed_at": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.dag_id, event.run_id) if isinstance(event, _EVENTS) else None


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = row or empty(event.dag_id, event.run_id)
    match event:
        case DagRunCreated():
            return {**row, "state": row["state"] or "running", "run_type": event.run_type,
                    "logical_date": event.logical_date, "conf_json": event.conf_json,
                    "dag_fingerprint": event.dag_fingerprint, "scheduler_id": event.scheduler_id,
                    "created_at": event.at}
        case DagRunFinished():
            return {**row, "state": event.state, "end_date": event.at, "reason": event.reason or None}
        case DagRunReopened():
            return {**row, "state": "running", "end_date": None, "reason": None, "reopened_at": event.at}
        case DeadlineMissed():
            return {**row, "deadline_missed_at": event.at}
    raise TypeError(f"dag_run read model cannot apply {type(event).__name__}")
