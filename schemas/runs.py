"""DAG run lifecycle (topic ``tock.events``, keyed by dag_id)."""

from __future__ import annotations

from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_DAG


@event(EVENTS, route=BY_DAG, version=2)
class DagRunCreated(EventBase):
    """A run exists; run_type is "scheduled", "manual", "backfill" or "asset_triggered".
    v2 added asset_events_json: an asset-triggered run's triggering events, the queued ones it consumes
    (a JSON list of objects with the fields of AssetEventQueued but dag_id and at; "" none)."""

    dag_id: str
    run_id: str
    logical_date: float
    run_type: str
    conf_json: str = "{}"
    dag_fingerprint: str
    scheduler_id: str
    asset_events_json: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class DagRunFinished(EventBase):
    """A run ended; state is "success" or "failed", reason says why when it is not its tasks'
    outcome alone (e.g. its DAG was deleted). v2 added reason."""

    dag_id: str
    run_id: str
    state: str
    reason: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class DagRunTimedOut(EventBase):
    """The run was still running ``timeout`` seconds (its DAG's dagrun_timeout) after ``started_at``
    (its creation, or its reopening): the owner fails it. Its queued and running tries are stopped
    (TaskKillRequested), its tasks not started are skipped (TaskSkipped), and it finishes failed
    (DagRunFinished, reason naming the timeout) once no try of it runs."""

    dag_id: str
    run_id: str
    started_at: float
    timeout: float
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class DagRunReopened(EventBase):
    """A finished run runs again: some of its tasks were cleared (request_id of the clear)."""

    dag_id: str
    run_id: str
    request_id: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class BackfillPlanned(EventBase):
    """A backfill was accepted: the logical dates it will create (or re-run) runs for, in order."""

    dag_id: str
    backfill_id: str
    logical_dates: list[float]
    reprocess_failed: bool = False
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class BackfillFinished(EventBase):
    """Every run of the backfill ended ("success" / "failed"), or it was cancelled ("cancelled")."""

    dag_id: str
    backfill_id: str
    state: str
    at: float


@event(EVENTS, route=BY_DAG)
class DeadlineMissed(EventBase):
    """A run was still going when the deadline its DAG declares passed."""

    dag_id: str
    run_id: str
    deadline: float
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class CallbackCalled(EventBase):
    """The monitor called a callback for a run, or for one of its task instances (``task_id``; ""
    for the run): ``trigger`` is "failure" or "deadline_missed" (a DAG's ``on_failure`` /
    ``on_deadline_missed``), or what an Airflow-style callback is for: "success", "failure", "retry",
    "execute" or "skipped" (a task's ``on_*_callback``, a DAG's ``on_success_callback`` /
    ``on_failure_callback``). ``try_number`` is the try a task's callback was called for (0: none).
    ``ok`` whether ``target`` (a webhook URL, or a ``module:function`` or ``/path/dag.py:function``
    path) accepted it within ``attempts`` tries; ``detail`` is its last answer or error.
    v2 added task_id (a task instance's deadline miss); v3 added try_number (task callbacks)."""

    dag_id: str
    run_id: str
    trigger: str
    task_id: str = ""
    try_number: int = 0
    target: str
    attempts: int
    ok: bool
    detail: str = ""
    at: float


def manual_run_id(request_id: str) -> str:
    """The run id of a TriggerDagRun request: derived, so a repeated request names the same run."""
    return f"manual__{request_id}"
