"""Triggering at a date (`tock dags trigger -l`, the API's logical_date) and the data intervals that
`tock runs list` and the API's runs show."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from projections.queries import run_interval
from services.api import models
from tock_cli import app
from tock_cli.scheduler_commands import logical_date_option


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("text", "expected"), [
    (None, None),
    ("2024-01-31", utc(2024, 1, 31)),
    ("2024-01-31T06:30", utc(2024, 1, 31, 6, 30)),
    ("2024-01-31T06:30:00Z", utc(2024, 1, 31, 6, 30)),
    ("2024-01-31T06:30:00+01:00", utc(2024, 1, 31, 5, 30)),
])
def test_the_logical_date_option(text, expected):
    assert logical_date_option(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("yesterday", "not an ISO 8601 date"), ("31/01/2024", "not an ISO 8601 date"),
    ("2024-02-30", "not an ISO 8601 date"), ("0001-01-01", "outside the dates"),
])
def test_a_bad_logical_date_exits_2_naming_it(text, problem, capsys):
    with pytest.raises(typer.Exit) as exited:
        logical_date_option(text)
    assert exited.value.exit_code == 2
    error = capsys.readouterr().err
    assert "--logical-date" in error and problem in error and repr(text) in error


@pytest.mark.parametrize("flag", ["--logical-date", "-l"])
def test_tock_dags_trigger_refuses_a_bad_date_before_it_reaches_the_log(flag):
    result = CliRunner().invoke(app, ["dags", "trigger", "etl", flag, "not-a-date"])
    assert result.exit_code == 2
    assert "not an ISO 8601 date" in result.output


@pytest.mark.parametrize(("given", "expected"), [
    ("2024-01-31T06:00:00+02:00", utc(2024, 1, 31, 4)), ("2024-01-31", utc(2024, 1, 31)),
    (1_700_000_000, 1_700_000_000.0), (None, None),
])
def test_the_apis_logical_date_is_iso_8601_or_seconds(given, expected):
    assert models.TriggerRequest(logical_date=given).logical_date == expected


@pytest.mark.parametrize("given", ["soon", "0001-01-01", float("nan"), float("inf"), 1e300, True])
def test_the_api_refuses_a_logical_date_it_cannot_read(given):
    with pytest.raises(ValidationError, match="logical_date"):
        models.TriggerRequest(logical_date=given)


DAILY_BERLIN = {"schedule": "0 2 * * *", "timezone": "Europe/Berlin", "start_date": utc(2024, 1, 1)}


@pytest.mark.parametrize(("run", "dag", "expected"), [
    pytest.param({"run_type": "scheduled", "logical_date": utc(2024, 3, 31, 1)}, DAILY_BERLIN,
                 (utc(2024, 3, 30, 1), utc(2024, 3, 31, 1)), id="scheduled, across spring forward"),
    pytest.param({"run_type": "backfill", "logical_date": utc(2024, 10, 27, 1)}, DAILY_BERLIN,
                 (utc(2024, 10, 26), utc(2024, 10, 27, 1)), id="backfill, across fall back"),
    pytest.param({"run_type": "manual", "logical_date": utc(2024, 5, 5, 5)}, DAILY_BERLIN,
                 (utc(2024, 5, 5, 5), utc(2024, 5, 5, 5)), id="manual: empty"),
    pytest.param({"run_type": "scheduled", "logical_date": utc(2024, 1, 1, 2)},
                 {"schedule": "0 * * * *", "timezone": None, "start_date": None},
                 (utc(2024, 1, 1, 1), utc(2024, 1, 1, 2)), id="a row from before the timezone column: UTC"),
    pytest.param({"run_type": "scheduled", "logical_date": utc(2024, 1, 1, 2)}, None,
                 (utc(2024, 1, 1, 2), utc(2024, 1, 1, 2)), id="its DAG not projected yet: empty"),
    pytest.param({"run_type": "scheduled", "logical_date": None}, DAILY_BERLIN, (None, None), id="no logical date"),
    pytest.param({"run_type": "scheduled", "logical_date": 5.0}, {**DAILY_BERLIN, "timezone": "Nowhere/Never"},
                 (None, None), id="a zone unknown here"),
])
def test_a_runs_data_interval_from_its_dags_definition(run, dag, expected):
    interval = run_interval(run, dag)
    assert (interval["data_interval_start"], interval["data_interval_end"]) == expected
