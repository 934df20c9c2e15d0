"""The SDK refuses what the scheduler could never compute with: a schedule that never fires, a start
date outside the computable range, a duration that is no finite time. Each is a DagDefinitionError
naming the file, the DAG, the field and why, so the DAG processor reports it as an import error."""

from __future__ import annotations

import textwrap
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from schemas import schedule as cron
from tock import DAG, BashTask, DagDefinitionError, load_dags

REFUSED = {
    "a schedule that never fires": ({"schedule": "0 0 30 2 *"}, "schedule '0 0 30 2 *' never fires"),
    "a schedule that never fires after its start": (
        {"schedule": "0 0 29 2 *", "start_date": datetime(9997, 1, 1)}, "never fires on or after start_date"),
    "a start date of year 1": ({"schedule": "@daily", "start_date": datetime(1, 1, 1)}, "start_date 0001-01-01"),
    "a start date of year 1 east of UTC": (
        {"schedule": "@daily", "start_date": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}, "start_date"),
    "@yearly from 9999-12-31": ({"schedule": "@yearly", "start_date": date(9999, 12, 31)}, "start_date 9999-12-31"),
    "@yearly from 9999-06-01": ({"schedule": "@yearly", "start_date": date(9999, 6, 1)},
                                "schedule '@yearly' never fires on or after start_date 9999-06-01"),
    "a retry delay of NaN": ({"retry_delay": float("nan")}, "retry_delay must be a finite number of seconds"),
    "an infinite deadline": ({"deadline": float("inf")}, "deadline must be a finite number of seconds"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_scheduler_cannot_compute_is_a_definition_error(case):
    arguments, problem = REFUSED[case]
    with pytest.raises(DagDefinitionError) as raised:
        DAG("poison", **arguments)
    assert raised.value.dag_id == "poison" and problem in raised.value.problem


@pytest.mark.parametrize("arguments", [
    {"schedule": "@daily", "start_date": datetime(1, 1, 2)},
    {"schedule": "@daily", "start_date": datetime(9999, 12, 30)},
    {"schedule": "@once", "start_date": datetime(9999, 12, 30)},
    {"schedule": "0 0 29 2 *", "start_date": datetime(2025, 1, 1)},
    {"schedule": "0 0 29 2 *"},
])
def test_dates_at_the_edges_of_the_range_and_rare_schedules_are_accepted(arguments):
    assert DAG("fine", **arguments).to_definition("/dags/fine.py").dag_id == "fine"


def test_the_range_is_that_of_schemas_schedule():
    assert DAG("first", start_date=datetime.fromtimestamp(cron.EARLIEST, UTC)).start_date == cron.EARLIEST
    with pytest.raises(DagDefinitionError, match="outside the dates"):
        DAG("last", start_date=datetime.fromtimestamp(cron.LATEST, UTC))


def test_a_task_duration_of_no_finite_time_is_refused():
    with DAG("dag"), pytest.raises(DagDefinitionError, match="execution_timeout must be a finite number"):
        BashTask("a", "true", execution_timeout=float("inf"))


def test_a_dag_file_with_a_schedule_that_never_fires_is_the_files_error(tmp_path):
    path = tmp_path / "poison.py"
    path.write_text(textwrap.dedent("""
        from tock import DAG, BashTask
        with DAG("poison", schedule="0 0 30 2 *"):
            BashTask("a", "true")
    """))
    with pytest.raises(DagDefinitionError) as raised:
        load_dags(path)
    message = str(raised.value)
    assert str(path) in message and "'poison'" in message and "never fires" in message
