"""Deciding new DAG runs: from cron schedules and from TriggerDagRun requests, within max_active_runs.

A scheduled run's logical date is the cron fire time; it is created once that time has
passed. Without catch-up only the latest missed fire time gets a run (no storm after
downtime); with ``catchup=True`` every fire time since the start date does, oldest first.
Fire times are read in the DAG's time zone; none after its end date gets a run.
"""

from __future__ import annotations

from collections import Counter

from schemas import CommandRejected, DagRunCreated, TriggerDagRun
from schemas import params as param_rules
from schemas import schedule as cron
from services.scheduler.core.assets import decide_asset_runs
from services.scheduler.core.model import DagEntry, SchedulerState, logical_date_iso, scheduled_run_id
from services.scheduler.core.quarantine import Guard
from services.scheduler.core.queuing import conf_too_large

CATCHUP_BATCH = 64  # at most this many runs per DAG per decision, however far behind


def decide_runs(state: SchedulerState, now: float, scheduler_id: str,
                guard: Guard | None = None) -> list[DagRunCreated | CommandRejected]:
    """Runs of triggers (or their refusal: a conf the DAG's params refuse), then of schedules, DAG by
    DAG under ``guard`` (default: a new one)."""
    guard = Guard(state) if guard is None else guard
    # One pass over the open runs, not one per DAG: this runs on every turn of the loop.
    active = Counter(run.dag_id for run in state.runs.values())
    events: list[DagRunCreated | CommandRejected] = []
    for (_dag_id, run_id), request in state.triggers.items():
        dag = state.dags.get(request.dag_id)
        if dag is None or guard.skips(request.dag_id):
            continue  # wait for the DAG to be parsed (or for its quarantine to end)
        with guard.of(request.dag_id):
            # Checked here, against the definition the run would have, not when the trigger is folded
            # (tock.dags and tock.events are read in no fixed order): the decision is in the log.
            refused = None
            if active[request.dag_id] < dag.definition.max_active_runs:  # else wait for room
                refused = _conf_refused(dag, request, now, scheduler_id)
            if refused is not None:
                events.append(refused)
            elif active[request.dag_id] < dag.definition.max_active_runs:
                active[request.dag_id] += 1
                logical = request.logical_date if request.logical_date is not None else request.at
                events.append(created_run(dag, run_id, logical, "manual", request.conf_json, scheduler_id, now))
    events += decide_asset_runs(state, now, scheduler_id, active, guard)
    for dag_id, dag in state.dags.items():
        due = state.next_due.get(dag_id)
        if due is not None and due <= now and dag_id not in state.paused and not guard.skips(dag_id):
            with guard.of(dag_id):
                events += _scheduled_runs(state, dag, now, active[dag_id], scheduler_id)
    return events


def _conf_refused(dag: DagEntry, request: TriggerDagRun, now: float, scheduler_id: str) -> CommandRejected | None:
    """A trigger whose conf the DAG's params refuse, or too large for its tries to carry (an API and a CLI
    refuse it first; this one reached the log anyway: the params changed since, a task triggered it, the
    API's limit is set higher), recorded with the reason."""
    reason = conf_too_large(request.conf_json)
    problems = [] if reason else param_rules.problems(dag.definition.params_json, request.conf_json)
    if problems:
        reason = "the conf does not fit the DAG's params: " + "; ".join(problems)
    if not reason:
        return None
    return CommandRejected(dag_id=request.dag_id, request_id=request.request_id, command="TriggerDagRun",
                           reason=reason, scheduler_id=scheduler_id, at=now)


def _scheduled_runs(state: SchedulerState, dag: DagEntry, now: float, active: int,
                    scheduler_id: str) -> list[DagRunCreated]:
    room = dag.definition.max_active_runs - active
    return [created_run(dag, scheduled_run_id(logical_date_iso(logical)), logical, "scheduled", "{}", scheduler_id,
                        now)
            for logical in due_logical_dates(dag, state.latest_scheduled.get(dag.definition.dag_id), now, room)]


def first_due(dag: DagEntry, latest: float | None) -> float | None:
    """When the DAG's next scheduled run falls due, given its latest one (None: never)."""
    definition = dag.definition
    if not definition.schedule:
        return None
    start = definition.start_date if definition.start_date is not None else dag.first_seen_at
    if definition.schedule == cron.ONCE:
        return start if latest is None else None
    # A start on the calendar's first day is looked up from there (a millisecond before it is no date).
    after = latest if latest is not None else max(start - 1e-3, cron.CALENDAR_START)
    fire = cron.next_fire(definition.schedule, after, definition.timezone)
    if fire is None or (definition.end_date is not None and fire > definition.end_date):
        return None  # it never fires again (in the calendar, or before its end date)
    return max(start, fire)


def due_logical_dates(dag: DagEntry, latest: float | None, now: float, room: int) -> list[float]:
    """Fire times that need a scheduled run now, at most ``room`` of them."""
    definition, schedule = dag.definition, dag.definition.schedule
    candidate = first_due(dag, latest)
    if room <= 0 or candidate is None or not candidate <= now or not schedule:  # no schedule: no candidate either
        return []
    if schedule == cron.ONCE:
        return [candidate]
    until = now if definition.end_date is None else min(now, definition.end_date)  # (candidate <= both)
    if not definition.catchup:
        latest = cron.latest_fire(schedule, until, definition.timezone)
        return [] if latest is None else [latest]
    return [candidate, *cron.fire_times(schedule, candidate, until, min(room, CATCHUP_BATCH) - 1,
                                        definition.timezone)[0]]


def created_run(dag: DagEntry, run_id: str, logical: float, run_type: str, conf_json: str,
                scheduler_id: str, now: float, asset_events_json: str = "") -> DagRunCreated:
    return DagRunCreated(dag_id=dag.definition.dag_id, run_id=run_id, logical_date=logical, run_type=run_type,
                         conf_json=conf_json, dag_fingerprint=dag.fingerprint, scheduler_id=scheduler_id,
                         asset_events_json=asset_events_json, at=now)
