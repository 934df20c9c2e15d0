"""Commands from users (API, CLI), appended to ``tock.events`` and decided by the owner."""

from __future__ import annotations

from schemas.declare import EVENTS, Event, event


@event(EVENTS)
class TriggerDagRun(Event):
    """Start a manual run; the scheduler derives the run id from request_id."""

    dag_id: str
    request_id: str
    conf_json: str = "{}"
    logical_date: float | None = None
    requested_by: str = ""
    at: float


@event(EVENTS)
class ClearTask(Event):
    """Run a task instance again with a new try."""

    dag_id: str
    run_id: str
    task_id: str
    requested_by: str = ""
    at: float


@event(EVENTS)
class MarkTask(Event):
    """Set a task instance's outcome by hand; state is "success" or "failed"."""

    dag_id: str
    run_id: str
    task_id: str
    state: str
    requested_by: str = ""
    at: float


@event(EVENTS)
class PauseDag(Event):
    """Stop (paused=True) or resume creating scheduled runs of a DAG."""

    dag_id: str
    paused: bool
    requested_by: str = ""
    at: float
