"""Read model ``import_error``: the latest parse error of each file that has one now.

A later clean parse of the same file (``DagFileProcessed``) clears it, and so does the
file's removal (``DagFileRemoved``); all are on ``tock.parsing`` keyed by file path, so
they are ordered.
"""

from __future__ import annotations

from projections.parse_status import key_of
from projections.records import Record, Row
from schemas import DagFileProcessed, DagFileRemoved, DagParseFailed

TABLE = "import_error"
__all__ = ["TABLE", "evolve", "key_of"]


def evolve(_row: Row | None, record: Record) -> Row | None:
    match record.event:
        case DagFileProcessed() | DagFileRemoved():
            return None
        case DagParseFailed() as event:
            return {"file_path": event.file_path, "error": event.error, "traceback": event.traceback,
                    "processor_id": event.processor_id, "file_hash": event.file_hash, "at": event.at}
    raise TypeError(f"import_error read model cannot apply {type(record.event).__name__}")
