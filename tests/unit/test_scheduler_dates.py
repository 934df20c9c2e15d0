"""Scheduler core: scheduled runs and backfills in the DAG's time zone, none after its end date."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from schemas import BackfillPlanned, DagParsed, DagRunCreated, RequestBackfill
from services.api.core import dag_list
from services.scheduler.core import decide_runs, evolve
from services.scheduler.core.backfill import decide_backfills
from tests.unit.scheduler_fixtures import parsed, state_of

BERLIN = "Europe/Berlin"


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def dag(schedule: str, start: float, *, timezone: str = "UTC", end: float | None = None,
        catchup: bool = False, max_active_runs: int = 16) -> DagParsed:
    """A DagParsed of one task with the given dates (what tock/dag.py writes for them)."""
    event = parsed(schedule=schedule, start_date=start, catchup=catchup, max_active_runs=max_active_runs)
    definition = dataclasses.replace(event.definition, timezone=timezone, end_date=end)
    return dataclasses.replace(event, definition=definition)


def iso(moments: list[float]) -> list[str]:
    return [datetime.fromtimestamp(moment, UTC).strftime("%m-%d %H:%M") for moment in moments]


def scheduled(state, now: float) -> list[DagRunCreated]:
    """Decide runs at ``now`` and fold them (the scheduler's turn)."""
    events = decide_runs(state, now, "s")
    for event in events:
        evolve(state, event)
    return events


@pytest.mark.parametrize(("given", "now", "expected"), [
    pytest.param(dag("0 2 * * *", utc(2024, 3, 29), timezone=BERLIN, catchup=True), utc(2024, 4, 1, 12),
                 ["03-29 01:00", "03-30 01:00", "03-31 01:00", "04-01 00:00"],
                 id="catch-up across spring forward: 02:00 Berlin time each day, 03:00 on the day it is missing"),
    pytest.param(dag("0 2 * * *", utc(2024, 10, 25), timezone=BERLIN, catchup=True), utc(2024, 10, 29),
                 ["10-25 00:00", "10-26 00:00", "10-27 01:00", "10-28 01:00"],
                 id="catch-up across fall back: one run on the day 02:00 happens twice"),
    pytest.param(dag("0 2 * * *", utc(2024, 3, 29), timezone=BERLIN), utc(2024, 4, 1, 12), ["04-01 00:00"],
                 id="no catch-up: the latest fire time in the zone"),
    pytest.param(dag("0 9 * * *", utc(2024, 1, 1), timezone="+05:30", catchup=True), utc(2024, 1, 3),
                 ["01-01 03:30", "01-02 03:30"], id="fixed offset"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3), catchup=True), utc(2024, 2, 1),
                 ["01-01 00:00", "01-02 00:00", "01-03 00:00"], id="catch-up stops at the end date (included)"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3, 12)), utc(2024, 2, 1), ["01-03 00:00"],
                 id="no catch-up after the end date: the last fire time before it, once"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2023, 12, 31, 12)), utc(2024, 2, 1), [],
                 id="an end date before the first fire time: no run"),
])
def test_scheduled_runs_in_the_dags_zone(given, now, expected):
    state = state_of(given)
    created = scheduled(state, now)
    assert iso([event.logical_date for event in created]) == expected


@pytest.mark.parametrize("catchup", [False, True])
def test_no_scheduled_run_after_the_end_date_however_long_the_scheduler_runs(catchup):
    end = utc(2024, 1, 1, 5, 30)
    state = state_of(dag("0 * * * *", utc(2024, 1, 1), end=end, catchup=catchup))
    logical = [event.logical_date for now in range(int(utc(2024, 1, 1)), int(utc(2024, 1, 2)), 1800)
               for event in scheduled(state, float(now))]
    assert logical and max(logical) == utc(2024, 1, 1, 5)
    assert state.next_due["etl"] is None  # nothing is due any more


def backfill(start: float, end: float) -> RequestBackfill:
    return RequestBackfill(dag_id="etl", request_id="bf1", start_date=start, end_date=end, at=1.0)


@pytest.mark.parametrize(("given", "request_", "expected"), [
    pytest.param(dag("0 2 * * *", utc(2024, 1, 1), timezone=BERLIN), backfill(utc(2024, 3, 30), utc(2024, 4, 1, 12)),
                 ["03-30 01:00", "03-31 01:00", "04-01 00:00"], id="fire times in the zone"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3)), backfill(utc(2024, 1, 1), utc(2024, 1, 9)),
                 ["01-01 00:00", "01-02 00:00", "01-03 00:00"], id="none after the DAG's end date"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3)), backfill(utc(2024, 2, 1), utc(2024, 2, 9)),
                 [], id="a range wholly after the end date: nothing planned"),
])
def test_backfill_plans_in_the_zone_and_not_after_the_end_date(given, request_, expected):
    [plan] = [event for event in decide_backfills(state_of(given, request_), utc(2024, 6, 1), "s")
              if isinstance(event, BackfillPlanned)]
    assert iso(plan.logical_dates) == expected


@pytest.mark.parametrize(("given", "now"), [
    pytest.param(dag("0 2 * * *", utc(2024, 3, 29), timezone=BERLIN, catchup=True), utc(2024, 3, 28), id="before"),
    pytest.param(dag("0 2 * * *", utc(2024, 3, 29), timezone=BERLIN, catchup=True), utc(2024, 3, 30, 12),
                 id="catch-up due"),
    pytest.param(dag("0 2 * * *", utc(2024, 3, 29), timezone=BERLIN), utc(2024, 4, 1, 12), id="overdue"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3)), utc(2024, 2, 1), id="past the end"),
    pytest.param(dag("0 0 * * *", utc(2024, 1, 1), end=utc(2024, 1, 3)), utc(2023, 12, 1), id="before, with an end"),
])
def test_the_dag_lists_next_run_is_the_run_the_scheduler_creates(given, now):
    definition = given.definition
    row = {"schedule": definition.schedule, "start_date": definition.start_date, "timezone": definition.timezone,
           "end_date": definition.end_date, "catchup": definition.catchup, "is_active": True, "parsed_at": 0.0}
    listed = dag_list.next_run(row, None, now)
    state = state_of(given)
    due = state.next_due["etl"]
    created = scheduled(state, max(now, due or now))
    assert listed == (created[0].logical_date if created else None)  # (with catch-up: the oldest)


def test_a_zone_the_scheduler_does_not_know_quarantines_the_dag_naming_it():
    state = state_of(dag("0 2 * * *", utc(2024, 1, 1), timezone="Nowhere/Never", catchup=True))
    assert "unknown time zone 'Nowhere/Never'" in state.quarantined["etl"].reason
    assert decide_runs(state, utc(2024, 2, 1), "s") == []
