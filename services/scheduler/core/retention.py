"""Retention: each DAG keeps its newest finished runs; older ones are forgotten, and of those the
scheduler keeps only that they existed (core/forgotten.py). A partition keeps the request ids of
its latest commands.

Forgetting is part of the fold, a function of the log alone (and of ``state.retention``, the same
settings for every fold of a partition): when a DagRunFinished leaves a DAG more finished runs
than it keeps (its definition's ``finished_runs_kept``, else TOCK_SCHEDULER_FINISHED_RUNS_KEPT),
the ones that finished first are forgotten. No clock is read, so a replay, a snapshot and its
tail, and the live scheduler forget the same runs at the same place in the log.

A forgotten run
- is never created again: a trigger repeated with its request id creates nothing, and a
  DagRunCreated naming it changes nothing;
- keeps its logical date from backfills: a date that had a run is left alone (even with
  ``reprocess_failed``: its tasks are gone), and a backfill it belonged to counts it as ended;
- changes nothing of the schedule: the next run follows ``latest_scheduled``, never forgotten;
- cannot be cleared, marked or killed: the command is refused (CommandRejected) saying so.
"""

from __future__ import annotations

from datetime import datetime

from services.scheduler.core.forgotten import ForgottenRuns
from services.scheduler.core.model import (
    Backfill,
    RunKey,
    SchedulerState,
    backfill_run_id,
    logical_date_iso,
    scheduled_run_id,
)

_DERIVED = (("scheduled", "scheduled__", scheduled_run_id), ("backfill", "backfill__", backfill_run_id))


def kept_of(state: SchedulerState, dag_id: str) -> int:
    """How many finished runs ``dag_id`` keeps."""
    dag = state.dags.get(dag_id) or state.removed_dags.get(dag_id)
    own = dag.definition.finished_runs_kept if dag is not None else None
    return state.retention.finished_runs_kept if own is None else max(own, 0)


def run_finished(state: SchedulerState, dag_id: str) -> None:
    """A run of ``dag_id`` joined its finished runs: forget those beyond what it keeps, first finished first."""
    kept = kept_of(state, dag_id)
    while state.finished.count_of(dag_id) > kept:
        oldest = state.finished.oldest_of(dag_id)
        if oldest is None:
            return
        forget(state, oldest)


def forget(state: SchedulerState, key: RunKey) -> None:
    """Drop a finished run, keeping only that it existed (and, for its backfill, how it ended)."""
    packed = state.finished.packed_of(key)
    del state.finished[key]
    logical, failed = packed.logical_date, packed.finished_state == "failed"
    forgotten = state.forgotten.setdefault(key[0], ForgottenRuns())
    kind = _derived_kind(key[1], packed.run_type, logical)
    if kind == "scheduled":
        forgotten.scheduled.add(logical)
    elif kind == "backfill":
        forgotten.backfill.add(logical)
    else:
        forgotten.add_other(key[1])
    forgotten.count += 1
    for backfill in state.backfills.values():
        if backfill.dag_id == key[0]:
            _leave_backfill(backfill, key, logical, failed)


def was_forgotten(state: SchedulerState, dag_id: str, run_id: str) -> bool:
    """Whether ``run_id`` of ``dag_id`` finished and was forgotten (a 64-bit digest of a manual run's
    id stands for it: another id matching it is as likely as guessing a random 64-bit number)."""
    forgotten = state.forgotten.get(dag_id)
    if forgotten is None:
        return False
    dated = _date_of(run_id)
    if dated is not None:
        kind, date = dated
        if date in (forgotten.scheduled if kind == "scheduled" else forgotten.backfill):
            return True
    return forgotten.has_other(run_id)


def date_forgotten(state: SchedulerState, dag_id: str, date: float) -> bool:
    """Whether a scheduled or backfill run of that logical date finished and was forgotten."""
    forgotten = state.forgotten.get(dag_id)
    return forgotten is not None and (date in forgotten.scheduled or date in forgotten.backfill)


def forgotten_reason(state: SchedulerState, dag_id: str, run_id: str) -> str:
    """Why a command naming a forgotten run is refused."""
    return (f"run {run_id} of DAG {dag_id} finished and was forgotten: the scheduler keeps the newest "
            f"{kept_of(state, dag_id)} finished runs of each DAG (TOCK_SCHEDULER_FINISHED_RUNS_KEPT, or the DAG's "
            "finished_runs_kept)")


def remember_request(state: SchedulerState, request_id: str) -> None:
    """A command's request id was applied (or refused): remembered among the latest ones."""
    state.requests.add(request_id, state.retention.request_ids_kept)


# -- helpers ----------------------------------------------------------------------------------

def _leave_backfill(backfill: Backfill, key: RunKey, logical: float, failed: bool) -> None:
    """A backfill's run (or a run of a date it still waits for) was forgotten: it counts as ended,
    and its date is left alone (it had a run; re-creating it could reuse its run id)."""
    if key in backfill.runs:
        backfill.runs.discard(key)
        backfill.forgotten_failed = backfill.forgotten_failed or failed
    while logical in backfill.dates:
        backfill.dates.remove(logical)


def _derived_kind(run_id: str, run_type: str, logical: float) -> str:
    """"scheduled" or "backfill" when the run id is the one derived from the logical date, else ""."""
    for kind, _prefix, derive in _DERIVED:
        if run_type == kind:
            try:
                return kind if run_id == derive(logical_date_iso(logical)) else ""
            except (ValueError, OverflowError, OSError):  # a date no run id derives from
                return ""
    return ""


def _date_of(run_id: str) -> tuple[str, float] | None:
    """(kind, logical date) of a run id derived from a logical date, else None."""
    for kind, prefix, derive in _DERIVED:
        if run_id.startswith(prefix):
            try:
                date = datetime.fromisoformat(run_id[len(prefix):]).timestamp()
            except (ValueError, OverflowError, OSError):
                return None
            return (kind, date) if derive(logical_date_iso(date)) == run_id else None
    return None
