"""Read model ``parse_status``: the last parse outcome of each file in the DAGs folder.

It comes from ``tock.parsing`` keyed by file path, so a file's events are ordered. A
file's row goes with the file (``DagFileRemoved``).
"""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json
from schemas import DagFileProcessed, DagFileRemoved, DagParseFailed

TABLE = "parse_status"
_EVENTS = (DagFileProcessed, DagParseFailed, DagFileRemoved)


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.file_path,) if isinstance(event, _EVENTS) else None


def evolve(_row: Row | None, record: Record) -> Row | None:
    match record.event:
        case DagFileRemoved():
            return None
        case DagFileProcessed() as event:
            return _status(event, "ok", dag_ids=as_json(event.dag_ids), duration=event.duration, error=None)
        case DagParseFailed() as event:
            return _status(event, "failed", dag_ids="[]", duration=None, error=event.error)
    raise TypeError(f"parse_status read model cannot apply {type(record.event).__name__}")


def _status(event, state: str, **columns) -> Row:
    return {"file_path": event.file_path, "state": state, "processor_id": event.processor_id,
            "file_hash": event.file_hash, "dag_ids_json": columns["dag_ids"],
            "duration": columns["duration"], "error": columns["error"], "at": event.at}

