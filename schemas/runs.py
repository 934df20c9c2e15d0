"""DAG run lifecycle (topic ``tock.events``, keyed by dag_id)."""

from __future__ import annotations

from schemas.declare import EVENTS, Event, event


@event(EVENTS)
class DagRunCreated(Event):
    """A run exists; run_type is "scheduled" or "manual"."""

    dag_id: str
    run_id: str
    logical_date: float
    run_type: str
    conf_json: str = "{}"
    dag_fingerprint: str
    scheduler_id: str
    at: float


@event(EVENTS)
class DagRunFinished(Event):
    """A run ended; state is "success" or "failed"."""

    dag_id: str
    run_id: str
    state: str
    at: float


@event(EVENTS)
class DeadlineMissed(Event):
    """A run was still going when the deadline its DAG declares passed."""

    dag_id: str
    run_id: str
    deadline: float
    at: float
