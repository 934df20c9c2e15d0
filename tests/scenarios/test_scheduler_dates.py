"""Scenario: a DAG whose start_date is in a time zone and which has an end_date, through the real DAG
processor and scheduler: its catch-up runs are at its schedule's wall-clock time in that zone, and none
is after its end date."""

from __future__ import annotations

import textwrap
import time
from datetime import UTC, datetime

import pytest

from schemas import DagRunCreated
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, wait_until_published

pytestmark = pytest.mark.scenario

DAG_FILE = '''
from datetime import datetime
from zoneinfo import ZoneInfo

from tock import DAG, BashTask

with DAG("zoned", schedule="0 9 * * *", catchup=True,
         start_date=datetime(2024, 1, 1, tzinfo=ZoneInfo("Asia/Kolkata")),
         end_date=datetime(2024, 1, 4, 12, tzinfo=ZoneInfo("Asia/Kolkata"))) as dag:
    BashTask("a", "true")
'''


@pytest.fixture
def settings(make_settings, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "zoned.py").write_text(textwrap.dedent(DAG_FILE))
    settings = make_settings(dags_folder=folder, task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def test_catch_up_runs_at_the_zones_wall_clock_and_stops_at_the_end_date(settings, tmp_path):
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processes.start("dag-processor", name="dag-processor")
        processes.scheduler("s1")
        wait_until_published(settings, "zoned")
        tail.wait_for(lambda _events: len(tail.of_type(DagRunCreated, dag_id="zoned")) >= 4, 60, "four runs")
        # Read on for 3 s: a fifth run, if the end date were ignored, would be decided in that time.
        quiet_until = time.monotonic() + 3
        tail.wait_for(lambda _events: time.monotonic() > quiet_until, 10, "3 s more of the log")
    finally:
        processes.close()
        tail.close()
    created = tail.of_type(DagRunCreated, dag_id="zoned")
    # 09:00 in Kolkata (UTC+05:30) is 03:30 UTC; 1 to 4 January; the end date (4 January, 12:00) stops it.
    assert [datetime.fromtimestamp(event.logical_date, UTC).isoformat() for event in created] == [
        f"2024-01-0{day}T03:30:00+00:00" for day in (1, 2, 3, 4)]
    assert {event.run_type for event in created} == {"scheduled"}
