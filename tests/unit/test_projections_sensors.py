"""task_instance for a sensor (issue 24): given its pokes and the owner's decisions, then its row: Airflow's
``up_for_reschedule`` between pokes (with the next poke's time), and its timeout's end."""

from __future__ import annotations

import pytest

from projections.view import fold
from schemas import SensorTimedOut, TaskPoked, TaskQueued, TaskRescheduled, TaskStarted, TaskSucceeded
from tests.unit.projection_logs import LogBuilder

KEY = ("etl", "r1", "wait", -1)
IDS = {"dag_id": "etl", "run_id": "r1", "task_id": "wait"}


def _row(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records).rows["task_instance"][KEY]


def _poke(n, at):
    return [TaskQueued(**IDS, try_number=n, executor="local", queue="default", scheduler_id="s1", at=at),
            TaskStarted(**IDS, try_number=n, runner_id=f"w{n}", hostname="h", pid=7, at=at + 1),
            TaskPoked(**IDS, try_number=n, runner_id=f"w{n}", at=at + 2)]


def _rescheduled(n, not_before):
    return TaskRescheduled(**IDS, try_number=n, next_try_number=n + 1, not_before=not_before, waiting_since=11.0,
                           poke=n, at=not_before - 5)


def test_between_pokes_the_row_is_up_for_reschedule_with_its_next_poke():
    row = _row(*_poke(1, 10.0), _rescheduled(1, 30.0))
    assert (row["state"], row["try_number"], row["retry_not_before"], row["end_date"]) == \
        ("up_for_reschedule", 1, 30.0, 12.0)
    assert _row(*_poke(1, 10.0))["state"] == "up_for_reschedule"  # the poke, before the owner's decision


def test_the_next_poke_is_a_new_try_and_a_met_one_succeeds():
    row = _row(*_poke(1, 10.0), _rescheduled(1, 30.0), *_poke(2, 30.0)[:2],
               TaskSucceeded(**IDS, try_number=2, runner_id="w2", at=33.0))
    assert (row["state"], row["try_number"], row["retry_not_before"]) == ("success", 2, None)


@pytest.mark.parametrize("state", ["failed", "skipped"])
def test_the_timeout_ends_it_saying_so(state):
    row = _row(*_poke(1, 10.0), SensorTimedOut(**IDS, try_number=1, state=state, waited=61.0, timeout=60.0, at=13.0))
    assert row["state"] == state and "timed out" in row["reason"] and row["retry_not_before"] is None
