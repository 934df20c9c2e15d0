"""DAG processor events (topic ``tock.parsing``, keyed by file path)."""

from __future__ import annotations

from schemas.declare import DAGS, PARSING, EventBase, event
from schemas.routing import BY_DAG, BY_FILE


@event(PARSING, route=BY_FILE, version=2)
class ProcessorStarted(EventBase):
    """A child process began parsing a file; it must finish or be killed by ``deadline``.

    v2 adds ``file_hash``: the content hash the scan saw, so a timeout or crash can be
    recorded against that content (and the file is not retried until it changes).
    """

    file_path: str
    processor_id: str
    pid: int
    deadline: float
    at: float
    file_hash: str = ""


@event(PARSING, route=BY_FILE)
class ProcessorFinished(EventBase):
    """A parsing child exited on its own and was reaped."""

    file_path: str
    processor_id: str
    pid: int
    exit_code: int
    duration: float
    at: float


@event(PARSING, route=BY_FILE)
class ProcessorKilled(EventBase):
    """A parsing child was killed (reason: timeout, shutdown) or died (reason: died)."""

    file_path: str
    processor_id: str
    pid: int
    reason: str
    exit_code: int | None = None
    at: float


@event(PARSING, route=BY_FILE, version=2)
class DagFileProcessed(EventBase):
    """A file parsed cleanly and defined these DAGs.

    v2 adds ``imports``: the modules of the DAGs folder the parse imported (path -> hash of
    the bytes compiled), so an unchanged file whose imports are unchanged too need not be
    parsed again every interval; None: not recorded (then it is).
    """

    file_path: str
    processor_id: str
    file_hash: str
    dag_ids: list[str]
    duration: float
    at: float
    imports: dict[str, str] | None = None


@event(PARSING, route=BY_FILE)
class DagParseFailed(EventBase):
    """A file could not be parsed: an exception, a timeout, a crash of the parser."""

    file_path: str
    processor_id: str
    file_hash: str
    error: str
    traceback: str = ""
    at: float


@event(PARSING, route=BY_FILE)
class DagFileRemoved(EventBase):
    """A DAG file disappeared from the DAGs folder (its DAGs each get a DagRemoved)."""

    file_path: str
    at: float


@event(PARSING, route=BY_DAG)
class DagRemoved(EventBase):
    """A DAG is gone: its file was deleted or no longer defines it."""

    dag_id: str
    file_path: str
    at: float


# Re-exported so that ``tock.dags`` producers import topics from one place.
__all__ = [
    "DAGS",
    "DagFileProcessed",
    "DagFileRemoved",
    "DagParseFailed",
    "DagRemoved",
    "ProcessorFinished",
    "ProcessorKilled",
    "ProcessorStarted",
]
