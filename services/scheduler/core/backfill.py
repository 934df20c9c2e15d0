"""Backfills: plan the logical dates of a RequestBackfill (fire times in the DAG's time zone, none
after the DAG's end date), then create (or re-run) their runs
as max_active_runs allows, and say when the backfill is over.

A date that already has an open run is left alone; one whose run finished is left alone
too, unless ``reprocess_failed`` and that run failed: then it is reopened and its failed
tasks cleared. A date whose run was forgotten (retention.py) is left alone in any case.
"""

from __future__ import annotations

from collections import Counter
from typing import TypeAlias

from schemas import (
    BackfillFinished,
    BackfillPlanned,
    CommandRejected,
    DagRunCreated,
    DagRunReopened,
    RequestBackfill,
    TaskCleared,
)
from schemas import params as param_rules
from schemas import schedule as cron
from services.scheduler.core.model import (
    FAILED,
    UPSTREAM_FAILED,
    Backfill,
    DagEntry,
    DagRun,
    RunKey,
    SchedulerState,
    backfill_run_id,
    logical_date_iso,
    scheduled_run_id,
)
from services.scheduler.core.quarantine import Guard
from services.scheduler.core.queuing import conf_too_large
from services.scheduler.core.retention import date_forgotten
from services.scheduler.core.runs import created_run

MOST_RUNS = 10_000  # a backfill longer than this is refused: split it

BackfillDecision: TypeAlias = (BackfillPlanned | CommandRejected | BackfillFinished | DagRunCreated | DagRunReopened
                               | TaskCleared)
"""What deciding backfills writes: plans (or refusals), their runs (new, or failed ones re-run), their end."""


def decide_backfills(state: SchedulerState, now: float, scheduler_id: str,
                     guard: Guard | None = None) -> list[BackfillDecision]:
    """Plans, then each backfill's runs, DAG by DAG under ``guard`` (default: a new one)."""
    guard = Guard(state) if guard is None else guard
    # A request for a DAG whose definition is not folded yet waits for it, as a trigger does:
    # tock.dags and tock.events are read side by side, in no fixed order.
    events: list[BackfillDecision] = []
    for request in state.backfill_requests.values():
        if request.dag_id in state.dags and not guard.skips(request.dag_id):
            with guard.of(request.dag_id):
                events.append(_plan(state, request, now, scheduler_id))
    active = Counter(run.dag_id for run in state.runs.values())
    for backfill_id, backfill in state.backfills.items():
        if not guard.skips(backfill.dag_id):
            with guard.of(backfill.dag_id):
                events += _advance(state, backfill_id, backfill, active, now, scheduler_id)
    return events


def _plan(state: SchedulerState, request: RequestBackfill, now: float,
          scheduler_id: str) -> BackfillPlanned | CommandRejected:
    dag = state.dags.get(request.dag_id)
    problem = _problem(dag, request)
    if problem or dag is None or not dag.definition.schedule:  # (no DAG or no schedule: a problem)
        return _refused(request, problem, now, scheduler_id)
    schedule, zone, dag_end = dag.definition.schedule, dag.definition.timezone, dag.definition.end_date
    since = max(request.start_date - 1e-3, cron.CALENDAR_START)  # (the calendar's first moment has no before)
    until = request.end_date if dag_end is None else min(request.end_date, dag_end)  # none after the DAG's end
    dates, _past_calendar = cron.fire_times(schedule, since, until, MOST_RUNS + 1, zone)
    if not cron.plannable(schedule, request.start_date, request.end_date, zone):  # the API's rule too
        last = logical_date_iso(dates[-1] if dates else request.start_date)
        problem = (f"the range runs past the calendar: the schedule has no fire time after {last} in years "
                   f"1-9999, yet the end date is {logical_date_iso(request.end_date)}; end the backfill earlier")
        return _refused(request, problem, now, scheduler_id)
    if len(dates) > MOST_RUNS:
        problem = f"more than {MOST_RUNS} schedule intervals between the dates: split the backfill"
        return _refused(request, problem, now, scheduler_id)
    wanted = [date for date in dates if _wanted(state, request.dag_id, date, request.reprocess_failed)]
    return BackfillPlanned(dag_id=request.dag_id, backfill_id=request.request_id, logical_dates=wanted,
                           reprocess_failed=request.reprocess_failed, scheduler_id=scheduler_id, at=now)


def _refused(request: RequestBackfill, problem: str, now: float, scheduler_id: str) -> CommandRejected:
    return CommandRejected(dag_id=request.dag_id, request_id=request.request_id, command="RequestBackfill",
                           reason=problem, scheduler_id=scheduler_id, at=now)


def _problem(dag: DagEntry | None, request: RequestBackfill) -> str:
    if dag is None:
        return f"DAG {request.dag_id} is not defined"
    if not dag.definition.schedule or dag.definition.schedule == cron.ONCE:
        return f"DAG {request.dag_id} has no recurring schedule to backfill"
    for name, moment in (("start date", request.start_date), ("end date", request.end_date)):
        if not cron.in_calendar(moment):
            return f"the {name} {moment!r} is outside the calendar (years 1-9999)"
    if request.end_date < request.start_date:
        return "the end date is before the start date"
    if too_large := conf_too_large(request.conf_json):
        return too_large
    conf_problems = param_rules.problems(dag.definition.params_json, request.conf_json)
    if conf_problems:
        return "the conf does not fit the DAG's params: " + "; ".join(conf_problems)
    return ""


def _advance(state: SchedulerState, backfill_id: str, backfill: Backfill, active: Counter[str], now: float,
             scheduler_id: str) -> list[BackfillDecision]:
    if backfill.cancelled:
        return [BackfillFinished(dag_id=backfill.dag_id, backfill_id=backfill_id, state="cancelled", at=now)]
    dag = state.dags.get(backfill.dag_id)
    if dag is None:
        return []
    events: list[BackfillDecision] = []
    for date in backfill.dates[:max(dag.definition.max_active_runs - active[backfill.dag_id], 0)]:
        failed = _existing(state, backfill.dag_id, date)
        run_id = backfill_run_id(logical_date_iso(date))
        events += _rerun(failed, backfill_id, now) if failed is not None else [
            created_run(dag, run_id, date, "backfill", backfill.conf_json, scheduler_id, now)]
        active[backfill.dag_id] += 1
    if not backfill.dates and all(key in state.finished for key in backfill.runs):
        failed_any = backfill.forgotten_failed or any(state.finished[key].finished_state == "failed"
                                                      for key in backfill.runs)
        events.append(BackfillFinished(dag_id=backfill.dag_id, backfill_id=backfill_id,
                                       state="failed" if failed_any else "success", at=now))
    return events


def _rerun(run: DagRun, backfill_id: str, now: float) -> list[DagRunReopened | TaskCleared]:
    """Reopen a failed run and clear its failed tasks."""
    reopened: list[DagRunReopened | TaskCleared] = [
        DagRunReopened(dag_id=run.dag_id, run_id=run.run_id, request_id=backfill_id, at=now)]
    return reopened + [
        TaskCleared(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id, map_index=instance.map_index,
                    try_number=instance.try_number, request_id=backfill_id, at=now)
        for instance in run.tasks.values() if instance.state in (FAILED, UPSTREAM_FAILED)]


def _wanted(state: SchedulerState, dag_id: str, date: float, reprocess_failed: bool) -> bool:
    keys = _keys(dag_id, date)
    if any(key in state.runs for key in keys) or date_forgotten(state, dag_id, date):
        return False
    finished = [state.finished[key] for key in keys if key in state.finished]
    return not finished or (reprocess_failed and any(run.finished_state == "failed" for run in finished))


def _existing(state: SchedulerState, dag_id: str, date: float) -> DagRun | None:
    """A finished failed run of that date (to re-run), if any."""
    for key in _keys(dag_id, date):
        run = state.finished.get(key)
        if run is not None and run.finished_state == "failed":
            return run
    return None


def _keys(dag_id: str, date: float) -> list[RunKey]:
    iso = logical_date_iso(date)
    return [(dag_id, scheduled_run_id(iso)), (dag_id, backfill_run_id(iso))]
