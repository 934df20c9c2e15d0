"""What the API accepts as dates and confs (pure): bounded to what the scheduler computes with, finite,
and small enough for one Kafka record. Issue 20, items 3 and 4."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from services.api import models, targets

YEAR_9999_JUNE = dt.datetime(9999, 6, 1, tzinfo=dt.UTC).timestamp()


def _utc(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize("logical_date", [1e300, -1e300, float("nan"), float("inf"), float("-inf"), -1.0,
                                          YEAR_9999_JUNE])
def test_a_trigger_with_a_logical_date_the_scheduler_cannot_compute_with_is_refused(logical_date):
    with pytest.raises(ValidationError, match="logical_date") as refused:
        models.TriggerRequest(logical_date=logical_date)
    assert "between the years 1970 and 9998" in str(refused.value)


@pytest.mark.parametrize("logical_date", [None, 0.0, 1_700_000_000.0, _utc(9998, 12, 31, 23)])
def test_a_trigger_with_a_computable_logical_date_is_taken(logical_date):
    assert models.TriggerRequest(logical_date=logical_date).logical_date == logical_date


@pytest.mark.parametrize("date", [1e300, float("nan"), float("-inf"), "9999-06-01", "0001-01-01", "1969-12-31"])
def test_backfill_dates_out_of_range_are_refused(date):
    with pytest.raises(ValidationError, match="start_date"):
        models.BackfillRequest(start_date=date, end_date="2024-01-01")
    with pytest.raises(ValueError, match="not a date between the years 1970 and 9998"):
        targets.parse_instant(date)


@pytest.mark.parametrize("conf", [{"x": float("nan")}, {"x": [1, {"y": float("inf")}]}, {"x": float("-inf")}])
def test_a_conf_holding_a_number_json_cannot_carry_is_refused(conf):
    with pytest.raises(ValidationError, match="finite"):
        models.TriggerRequest(conf=conf)
    with pytest.raises(ValidationError, match="finite"):
        models.BackfillRequest(start_date="2024-01-01", end_date="2024-01-02", conf=conf)


def _dag(schedule: str) -> dict:
    return {"dag_id": "yearly", "schedule": schedule}


@pytest.mark.parametrize(("schedule", "start", "end"), [
    ("@yearly", "9998-06-01", "9998-12-29"),  # the next fire after the range is 9999-01-01: computable
    ("@yearly", "9998-12-31T23:00", "9998-12-31T23:30"),
    ("@daily", "2024-01-01", "2024-01-31"),
])
def test_a_backfill_range_the_scheduler_can_plan_is_taken(schedule, start, end):
    targets.backfill_range(_dag(schedule), targets.parse_instant(start), targets.parse_instant(end))


def test_a_backfill_whose_runs_would_pass_the_year_9999_is_refused_with_the_reason():
    # Feb 29: after 9996-02-29 the next fire would be in the year 10000, which the scheduler cannot compute.
    with pytest.raises(targets.Refused) as refused:
        targets.backfill_range(_dag("0 0 29 2 *"), _utc(9990, 6, 1), _utc(9998, 12, 29))
    assert refused.value.status == 422 and "year 9999" in refused.value.reason


def test_a_conf_over_the_limit_is_refused_naming_the_limit_and_its_size():
    assert targets.conf_text({"b": 1, "a": "é"}, limit=1024) == '{"a": "\\u00e9", "b": 1}'
    with pytest.raises(targets.Refused) as refused:
        targets.conf_text({"blob": "x" * 2000}, limit=1024)
    assert refused.value.status == 422
    assert "2012 bytes" in refused.value.reason and "1024" in refused.value.reason
    assert "TOCK_API_CONF_LIMIT_BYTES" in refused.value.reason
