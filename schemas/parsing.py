"""DAG processor events (topic ``tock.parsing``, keyed by file path)."""

from __future__ import annotations

from schemas.declare import DAGS, PARSING, Event, event


@event(PARSING)
class ProcessorStarted(Event):
    """A child process began parsing a file; it must finish or be killed by ``deadline``."""

    file_path: str
    processor_id: str
    pid: int
    deadline: float
    at: float


@event(PARSING)
class ProcessorFinished(Event):
    """A parsing child exited on its own and was reaped."""

    file_path: str
    processor_id: str
    pid: int
    exit_code: int
    duration: float
    at: float


@event(PARSING)
class ProcessorKilled(Event):
    """A parsing child was killed (reason: timeout, shutdown) or died (reason: died)."""

    file_path: str
    processor_id: str
    pid: int
    reason: str
    exit_code: int | None = None
    at: float


@event(PARSING)
class DagFileProcessed(Event):
    """A file parsed cleanly and defined these DAGs."""

    file_path: str
    processor_id: str
    file_hash: str
    dag_ids: list[str]
    duration: float
    at: float


@event(PARSING)
class DagParseFailed(Event):
    """A file could not be parsed: an exception, a timeout, a crash of the parser."""

    file_path: str
    processor_id: str
    file_hash: str
    error: str
    traceback: str = ""
    at: float


@event(PARSING)
class DagRemoved(Event):
    """A DAG is gone: its file was deleted or no longer defines it."""

    dag_id: str
    file_path: str
    at: float


# Re-exported so that ``tock.dags`` producers import topics from one place.
__all__ = [
    "DAGS",
    "DagFileProcessed",
    "DagParseFailed",
    "DagRemoved",
    "ProcessorFinished",
    "ProcessorKilled",
    "ProcessorStarted",
]
