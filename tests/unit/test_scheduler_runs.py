"""Scheduler core: scheduled runs from cron (catch-up or not), max_active_runs, pause."""

from __future__ import annotations

from datetime import UTC, datetime, timezone

import pytest

from schemas import PauseDag
from services.scheduler.core import decide, decide_runs, evolve
from tests.unit.scheduler_fixtures import POLICY, parsed, state_of

HOUR = 3600.0
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def hourly(**options):
    return parsed(schedule="0 * * * *", start_date=T0, **options)


@pytest.mark.parametrize(("now", "catchup", "expected_hours"), [
    pytest.param(T0 - 1, False, [], id="before-start"),
    pytest.param(T0, False, [0], id="at-start"),
    pytest.param(T0 + 5.5 * HOUR, False, [5], id="no-catchup-only-latest"),
    pytest.param(T0 + 5.5 * HOUR, True, [0, 1, 2, 3, 4, 5], id="catchup-every-missed"),
])
def test_first_scheduled_runs(now, catchup, expected_hours):
    events = decide_runs(state_of(hourly(catchup=catchup)), now, "s")
    assert [(event.logical_date - T0) / HOUR for event in events] == expected_hours
    assert all(event.run_type == "scheduled" for event in events)


def test_no_second_run_for_the_same_fire_time():
    state = state_of(hourly())
    for event in decide_runs(state, T0 + 10, "s"):
        evolve(state, event)
    assert decide_runs(state, T0 + 20, "s") == []
    assert [event.logical_date for event in decide_runs(state, T0 + HOUR, "s")] == [T0 + HOUR]


def test_no_catchup_storm_after_downtime():
    state = state_of(hourly())
    for event in decide_runs(state, T0 + 10, "s"):
        evolve(state, event)
    later = decide_runs(state, T0 + 48 * HOUR + 10, "s")
    assert [event.logical_date for event in later] == [T0 + 48 * HOUR]


def test_catchup_is_bounded_by_max_active_runs():
    events = decide_runs(state_of(hourly(catchup=True, max_active_runs=2)), T0 + 5.5 * HOUR, "s")
    assert [(event.logical_date - T0) / HOUR for event in events] == [0, 1]


def test_run_id_names_the_logical_date():
    [event] = decide_runs(state_of(hourly()), T0 + 1, "s")
    assert event.run_id == "scheduled__2026-01-01T00:00:00+00:00"


def test_without_start_date_the_first_run_is_the_next_fire_time_after_first_parse():
    state = state_of(parsed(schedule="0 * * * *", at=T0 + 10))
    assert decide_runs(state, T0 + 20, "s") == []
    assert [event.logical_date for event in decide_runs(state, T0 + HOUR, "s")] == [T0 + HOUR]


def test_paused_dags_get_no_scheduled_runs():
    state = state_of(hourly(), PauseDag(dag_id="etl", paused=True, at=0.0))
    assert decide(state, T0 + 1, POLICY) == []
    evolve(state, PauseDag(dag_id="etl", paused=False, at=1.0))
    assert len(decide(state, T0 + 1, POLICY)) == 1


def test_once_runs_once():
    state = state_of(parsed(schedule="@once", start_date=T0))
    [event] = decide_runs(state, T0 + 1, "s")
    evolve(state, event)
    assert decide_runs(state, T0 + 100 * HOUR, "s") == []
