"""The typed rule for the runs an event concerns (services/scheduler/runs_touched.py)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from schemas import DagParsed, Event, PauseDag
from schemas.freeze import sample
from services.scheduler.core import DagTombstone
from services.scheduler.runs_touched import RunEvent, concerns_every_run, run_of

EVENT_TYPES = typing.get_args(Event)


def names_a_run(event_type: type) -> bool:
    return "run_id" in {field.name for field in dataclasses.fields(event_type)}


def test_run_events_are_exactly_the_events_of_the_union_that_name_a_run():
    assert set(typing.get_args(RunEvent)) == {event_type for event_type in EVENT_TYPES if names_a_run(event_type)}


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda event_type: event_type.__name__)
def test_the_run_of_an_event_is_its_dag_and_run_if_it_names_one(event_type):
    event = sample(event_type)
    assert run_of(event) == ((event.dag_id, event.run_id) if names_a_run(event_type) else None)


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda event_type: event_type.__name__)
def test_only_definitions_and_pauses_concern_every_run(event_type):
    assert concerns_every_run(sample(event_type)) == (event_type in (DagParsed, PauseDag))


def test_a_definitions_removal_concerns_every_run_and_names_none():
    assert concerns_every_run(DagTombstone("d")) and run_of(DagTombstone("d")) is None


def test_a_markers_clear_names_its_run_by_logical_date_so_it_concerns_every_run_of_its_dag():
    from schemas import ClearTask
    from services.scheduler.runs_touched import concerns_every_run

    by_date = ClearTask(dag_id="child", run_id="", logical_date=5.0, task_id="t", request_id="r", at=1.0)
    assert concerns_every_run(by_date)
    assert not concerns_every_run(ClearTask(dag_id="child", run_id="manual__x", task_id="t", at=1.0))
