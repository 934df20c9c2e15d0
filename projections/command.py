"""Read model ``command``: each operator command by its request id, and what became of it.

Every command that carries a request id (``TriggerDagRun``, ``ClearTask``, ``MarkTask``,
``KillTask``, ``RequestBackfill``) is ``accepted`` once it is in the log; the owner of its
DAG's partition may answer ``CommandRejected`` (then ``rejected`` with the reason).
Appending the same request id again (a retry) only counts in ``appended``: the first
append's fields stay, as the scheduler acts on the first one only.

Keyed by (dag_id, request_id): a DAG's commands and their answers share one partition,
so the row is the same whatever order a reader merges partitions in, and the scheduler
dedupes request ids per DAG. ``PauseDag`` and ``CancelBackfill`` carry no request id
(both are idempotent by nature) and are not listed.
"""

from __future__ import annotations

from projections.records import Key, Record, Row, payload_json
from schemas import ClearTask, CommandRejected, KillTask, MarkTask, RequestBackfill, TriggerDagRun
from schemas.runs import manual_run_id

TABLE = "command"
COMMANDS = (TriggerDagRun, ClearTask, MarkTask, KillTask, RequestBackfill)


def empty(dag_id: str, request_id: str) -> Row:
    return {"dag_id": dag_id, "request_id": request_id, "command": None, "run_id": None, "task_id": None,
            "requested_by": None, "at": None, "appended": 0, "status": None, "reason": None,
            "rejected_at": None, "payload_json": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    if isinstance(event, (*COMMANDS, CommandRejected)):
        return (event.dag_id, event.request_id)
    return None


def evolve(row: Row | None, record: Record) -> Row | None:
    event = record.event
    if not event.request_id:  # a command written before commands had request ids (v1)
        return row
    row = row or empty(event.dag_id, event.request_id)
    match event:
        case CommandRejected():
            return {**row, "command": row["command"] or event.command, "status": "rejected",
                    "reason": event.reason, "rejected_at": event.at}
        case _ if isinstance(event, COMMANDS):
            return _appended(row, event)
    raise TypeError(f"command read model cannot apply {type(event).__name__}")


def _appended(row: Row, event) -> Row:
    if row["appended"]:
        return {**row, "appended": row["appended"] + 1}
    return {**row, "command": type(event).__name__, "run_id": _run_id(event),
            "task_id": getattr(event, "task_id", None), "requested_by": event.requested_by, "at": event.at,
            "appended": 1, "status": row["status"] or "accepted", "payload_json": payload_json(event)}


def _run_id(event) -> str | None:
    if isinstance(event, TriggerDagRun):
        return manual_run_id(event.request_id)
    return getattr(event, "run_id", None)
