"""Airflow's macros: tock.macros."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import dateutil
import pytest

from tock import macros


@pytest.mark.parametrize(("ds", "days", "moved"), [
    ("2024-01-01", 5, "2024-01-06"),
    ("2024-01-06", -5, "2024-01-01"),
    ("2024-02-28", 1, "2024-02-29"),
    ("2023-02-28", 1, "2023-03-01"),
    ("2024-12-31", 1, "2025-01-01"),
    ("2024-03-01", 0, "2024-03-01"),
])
def test_ds_add(ds, days, moved):
    assert macros.ds_add(ds, days) == moved


def test_ds_add_refuses_what_is_not_a_ds():
    with pytest.raises(ValueError):
        macros.ds_add("01/02/2024", 1)


@pytest.mark.parametrize(("ds", "input_format", "output_format", "formatted"), [
    ("2015-01-01", "%Y-%m-%d", "%m-%d-%y", "01-01-15"),
    ("1/5/2015", "%m/%d/%Y", "%Y-%m-%d", "2015-01-05"),
    ("20240309", "%Y%m%d", "%Y/%j", "2024/069"),
])
def test_ds_format(ds, input_format, output_format, formatted):
    assert macros.ds_format(ds, input_format, output_format) == formatted


SINCE = datetime(2024, 3, 9, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("moment", "said"), [
    (SINCE + timedelta(days=2), "2 days after"),
    (SINCE - timedelta(hours=3), "3 hours before"),
    (SINCE - timedelta(minutes=1, seconds=5), "1 minute before"),
    (SINCE + timedelta(seconds=30), "30 seconds after"),
    (SINCE + timedelta(seconds=3), "a few seconds after"),
    (SINCE + timedelta(days=15), "2 weeks after"),
    (datetime(2024, 5, 10, 12, tzinfo=UTC), "2 months after"),
    (datetime(2021, 3, 1, tzinfo=UTC), "3 years before"),
    (datetime(2024, 3, 9, 13, 0), "1 hour after"),  # naive: UTC
])
def test_datetime_diff_for_humans_from_a_moment(moment, said):
    assert macros.datetime_diff_for_humans(moment, SINCE) == said


def test_datetime_diff_for_humans_from_now():
    now = datetime.now(UTC)
    assert macros.datetime_diff_for_humans(now + timedelta(days=3, minutes=1)) == "in 3 days"
    assert macros.datetime_diff_for_humans(now - timedelta(hours=5, minutes=1)) == "5 hours ago"


def test_the_namespace_offers_airflows_names():
    assert macros.datetime is datetime and macros.timedelta is timedelta
    assert macros.json is json and macros.time is time and macros.uuid is uuid and macros.dateutil is dateutil
    assert 0 <= macros.random() < 1  # Airflow's macros.random is the function random.random
    assert set(macros.__all__) >= {"ds_add", "ds_format", "datetime_diff_for_humans", "datetime", "timedelta",
                                   "dateutil", "time", "uuid", "random", "json"}
