"""Commands from users (API, CLI), appended to ``tock.events`` and decided by the owner."""

from __future__ import annotations

from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_DAG


@event(EVENTS, route=BY_DAG)
class TriggerDagRun(EventBase):
    """Start a manual run; the scheduler derives the run id from request_id."""

    dag_id: str
    request_id: str
    conf_json: str = "{}"
    logical_date: float | None = None
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=4)
class ClearTask(EventBase):
    """Run task instances again with new tries: ``task_id`` ("" = every task of the run) and, with
    ``downstream`` / ``upstream``, every task after / before it. A finished run reopens; a running
    try is stopped first. v2 added request_id, downstream and upstream.
    v3 added map_index: one instance of a mapped task (-1: the task's every instance).
    v4 added ``recursive`` (Airflow's: an ExternalTaskMarker cleared clears the task it names in another
    DAG), ``logical_date`` (the run at that logical date, when ``run_id`` is ""; a marker's clear) and
    ``recursion_left`` (how many markers deeper it may go; -1: not a marker's clear)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    request_id: str = ""
    downstream: bool = False
    upstream: bool = False
    requested_by: str = ""
    recursive: bool = False
    logical_date: float | None = None
    recursion_left: int = -1
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class MarkTask(EventBase):
    """Set a task instance's outcome by hand: "success", "failed" or "skipped". A running try is
    stopped first; tasks downstream follow the marked state. v2 added request_id.
    v3 added map_index: one instance of a mapped task (-1: the task's every instance)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    state: str
    request_id: str = ""
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class KillTask(EventBase):
    """Stop a task instance's running (or queued) try; it ends as killed: failed, not retried.
    v2 added map_index: one instance of a mapped task (-1: the task's every instance)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    request_id: str = ""
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class RequestBackfill(EventBase):
    """Create the runs of every schedule interval of the DAG with a logical date in
    [start_date, end_date], honouring max_active_runs; with reprocess_failed, failed runs of
    those dates run again. The backfill's id is its request_id."""

    dag_id: str
    request_id: str
    start_date: float
    end_date: float
    reprocess_failed: bool = False
    conf_json: str = "{}"
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class CancelBackfill(EventBase):
    """Create no more runs for backfill ``backfill_id``; runs already created go on."""

    dag_id: str
    backfill_id: str
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class PauseDag(EventBase):
    """Stop (paused=True) or resume creating scheduled runs of a DAG."""

    dag_id: str
    paused: bool
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class CommandRejected(EventBase):
    """The owner of the DAG's partition could not apply a command (e.g. its run is unknown): which
    command, by its request id, and why. Recorded once per request id."""

    dag_id: str
    request_id: str
    command: str
    reason: str
    scheduler_id: str
    at: float
