"""Runs' data intervals through the real projector and API, in the DAG's time zone; a trigger's
logical date given as ISO 8601 reaches the log as the run's logical date."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from schemas import DagRunCreated, TriggerDagRun
from tests.integration.projection_db import (  # noqa: F401
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.integration.test_api import AUTH, client  # noqa: F401 - fixture
from tests.integration.test_api_commands import _commands, _project, post
from tests.unit.projection_logs import dag_parsed

pytestmark = pytest.mark.integration


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def _nightly_in_berlin(at: float):
    event = dag_parsed("nightly", at)
    definition = dataclasses.replace(event.definition, dag_id="nightly", file_path="/dags/nightly.py",
                                     schedule="0 2 * * *", timezone="Europe/Berlin", start_date=utc(2024, 1, 1),
                                     end_date=utc(2024, 12, 31))
    return dataclasses.replace(event, file_path="/dags/nightly.py", definition=definition)


def test_runs_show_their_data_interval_in_the_dags_zone(client, projection_settings, engine):
    spring = utc(2024, 3, 31, 1)  # 03:00 CEST: the 02:00 that did not exist that day
    runs = [DagRunCreated(dag_id="nightly", run_id="scheduled__spring", logical_date=spring, run_type="scheduled",
                          dag_fingerprint="f", scheduler_id="s1", at=spring + 5),
            DagRunCreated(dag_id="nightly", run_id="manual__m1", logical_date=utc(2024, 4, 2, 9), run_type="manual",
                          dag_fingerprint="f", scheduler_id="s1", at=utc(2024, 4, 2, 9))]
    _project(projection_settings, engine, [_nightly_in_berlin(utc(2024, 1, 1)), *runs])
    dag = client.get("/api/v1/dags/nightly").json()
    assert (dag["timezone"], dag["end_date"]) == ("Europe/Berlin", utc(2024, 12, 31))
    one = client.get("/api/v1/dags/nightly/runs/scheduled__spring").json()
    assert (one["data_interval_start"], one["data_interval_end"]) == (utc(2024, 3, 30, 1), spring)  # 23 hours
    listed = {run["run_id"]: run for run in client.get("/api/v1/dags/nightly/runs", headers=AUTH).json()["items"]}
    assert listed["scheduled__spring"]["data_interval_start"] == utc(2024, 3, 30, 1)
    manual = listed["manual__m1"]
    assert manual["data_interval_start"] == manual["data_interval_end"] == utc(2024, 4, 2, 9)


def test_a_trigger_at_an_iso_date_appends_that_logical_date(client, projection_settings):
    answer = post(client, "/api/v1/dags/etl/runs", {"logical_date": "2024-01-31T06:00:00+02:00"}, key="at-a-date")
    assert answer.status_code == 202, answer.text
    [trigger] = [event for event in _commands(projection_settings, TriggerDagRun) if event.request_id == "at-a-date"]
    assert trigger.logical_date == utc(2024, 1, 31, 4)


@pytest.mark.parametrize("logical_date", ['"soon"', '"0001-01-01"', "NaN", "-Infinity"])
def test_a_trigger_at_a_date_it_cannot_read_is_422(client, logical_date):
    answer = client.post("/api/v1/dags/etl/runs", content=f'{{"logical_date": {logical_date}}}',
                         headers={**AUTH, "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert "logical_date" in answer.json()["detail"]


def test_a_backfill_of_a_dag_whose_zone_is_unknown_here_is_409_naming_it(client, projection_settings, engine):
    nowhere = _nightly_in_berlin(utc(2024, 1, 1))
    nowhere = dataclasses.replace(nowhere, definition=dataclasses.replace(nowhere.definition, timezone="Nowhere/Never"))
    _project(projection_settings, engine, [nowhere])
    answer = post(client, "/api/v1/dags/nightly/backfills", {"start_date": "2024-02-01", "end_date": "2024-02-03"})
    assert answer.status_code == 409, answer.text
    assert "unknown time zone 'Nowhere/Never'" in answer.json()["detail"]


def test_a_backfill_in_the_dags_zone_is_accepted(client, projection_settings, engine):
    _project(projection_settings, engine, [_nightly_in_berlin(utc(2024, 1, 1))])
    answer = post(client, "/api/v1/dags/nightly/backfills", {"start_date": "2024-03-30", "end_date": "2024-04-01"})
    assert answer.status_code == 202, answer.text
