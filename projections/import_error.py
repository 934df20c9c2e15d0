"""Read model ``import_error``: the latest parse error of each file that has one now, and each DAG
the scheduler quarantined (it could not fold or decide it: shown like an import error).

A later clean parse of the same file (``DagFileProcessed``) clears its parse error, and so does
the file's removal (``DagFileRemoved``); all are on ``tock.parsing`` keyed by file path, so
they are ordered. A quarantine (``DagQuarantined``) and its end (``DagQuarantineLifted``) are on
``tock.events`` keyed by dag_id, so ordered too: their row is ``<file path>#<dag id>``, apart from
the file's own parse error (a file may parse cleanly and still hold a DAG the scheduler refused).
"""

from __future__ import annotations

from projections.parse_status import key_of as file_key_of
from projections.records import Key, Record, Row
from schemas import DagFileProcessed, DagFileRemoved, DagParseFailed, DagQuarantined, DagQuarantineLifted

TABLE = "import_error"
__all__ = ["TABLE", "evolve", "key_of", "quarantine_key"]


def quarantine_key(file_path: str, dag_id: str) -> str:
    """The ``file_path`` column of a quarantined DAG's row."""
    return f"{file_path}#{dag_id}"


def key_of(record: Record) -> Key | None:
    event = record.event
    if isinstance(event, DagQuarantined | DagQuarantineLifted):
        return (quarantine_key(event.file_path, event.dag_id),)
    return file_key_of(record)


def evolve(row: Row | None, record: Record) -> Row | None:
    match record.event:
        case DagFileProcessed() | DagFileRemoved():
            return None
        case DagParseFailed() as event:
            return {"file_path": event.file_path, "error": event.error, "traceback": event.traceback,
                    "processor_id": event.processor_id, "file_hash": event.file_hash, "at": event.at}
        case DagQuarantined() as event:
            return {"file_path": quarantine_key(event.file_path, event.dag_id),
                    "error": f"DAG {event.dag_id} is quarantined by the scheduler (no runs, no tries until its "
                             f"file changes): {event.reason}",
                    "traceback": "", "processor_id": event.scheduler_id, "file_hash": event.fingerprint,
                    "at": event.at}
        case DagQuarantineLifted() as event:
            return None if row is None or row["file_hash"] == event.fingerprint else row
    raise TypeError(f"import_error read model cannot apply {type(record.event).__name__}")
