"""Operator commands in the read models: given these events, then these rows.

task_instance (mark, clear, kill, skipped, removed), dag_run (reopened, reason), and the
task_event history of each new event that names a task.
"""

from __future__ import annotations

import pytest

from projections.view import fold
from schemas import (
    ClearTask,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    KillTask,
    MarkTask,
    TaskCleared,
    TaskDeclaredDead,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskQueued,
    TaskRemoved,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskUpstreamFailed,
)
from tests.unit.projection_logs import LogBuilder

KEY = ("etl", "r1", "load", -1)
IDS = {"dag_id": "etl", "run_id": "r1", "task_id": "load"}


def _fold(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records)


def _row(*events):
    return _fold(*events).rows["task_instance"][KEY]


def queued(n, at=10.0):
    return TaskQueued(**IDS, try_number=n, executor="local", queue="default", scheduler_id="s1", at=at)


def started(n, at=11.0):
    return TaskStarted(**IDS, try_number=n, runner_id=f"w{n}", hostname="h", pid=7, at=at)


def succeeded(n, at=30.0):
    return TaskSucceeded(**IDS, try_number=n, runner_id=f"w{n}", at=at)


def failed(n, at=30.0):
    return TaskFailed(**IDS, try_number=n, runner_id=f"w{n}", error="boom", at=at)


def mark(state, at=20.0):
    return MarkTask(**IDS, state=state, request_id="m1", requested_by="alice", at=at)


def kill_requested(n, at=21.0, reason="marked success"):
    return TaskKillRequested(**IDS, try_number=n, reason=reason, scheduler_id="s1", at=at)


def killed(n, at=22.0, reason="killed as asked"):
    return TaskKilled(**IDS, try_number=n, runner_id=f"w{n}", reason=reason, at=at)


def cleared(n, at=40.0):
    return TaskCleared(**IDS, try_number=n, request_id="c1", at=at)


RUNNING = [queued(1), started(1)]
LATE_OUTCOMES = [succeeded(1), failed(1), killed(1),
                 TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1", at=90),
                 TaskRetryScheduled(**IDS, try_number=1, next_try_number=2, not_before=99, at=90)]


# --- mark ----------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["success", "failed", "skipped"])
@pytest.mark.parametrize("before", [[], [queued(1)], RUNNING, [*RUNNING, failed(1)],
                                    [TaskUpstreamFailed(**IDS, at=5)]], ids=["no row", "queued", "running",
                                                                             "failed", "upstream_failed"])
def test_a_mark_sets_the_state_at_once_whatever_the_state_before(before, state):
    row = _row(*before, mark(state))
    assert (row["state"], row["marked_at"], row["marked_by"], row["end_date"]) == (state, 20.0, "alice", 20.0)


@pytest.mark.parametrize("late", LATE_OUTCOMES, ids=lambda event: type(event).__name__)
@pytest.mark.parametrize("state", ["success", "failed", "skipped"])
def test_a_late_outcome_of_the_marked_try_does_not_overwrite_the_mark(state, late):
    row = _row(*RUNNING, mark(state), kill_requested(1), late)
    assert (row["state"], row["end_date"], row["error"], row["retry_not_before"]) == (state, 20.0, None, None)
    assert row["kill_requested_at"] == 21.0


def test_who_ran_a_marked_try_is_still_filled_in():
    row = _row(queued(1), mark("success"), started(1, at=25))
    assert (row["state"], row["runner_id"], row["start_date"]) == ("success", "w1", 25)


def test_a_state_one_cannot_mark_changes_nothing():
    assert _row(*RUNNING, mark("great"))["state"] == "running"


@pytest.mark.parametrize("reset", [queued(2, at=50), cleared(1, at=50)], ids=["queued", "cleared"])
def test_a_new_try_or_a_clear_ends_the_mark(reset):
    row = _row(*RUNNING, mark("failed"), reset)
    assert (row["marked_at"], row["marked_by"]) == (None, None)
    assert row["state"] in ("queued", "cleared")


def test_the_next_try_after_a_mark_follows_its_own_outcome():
    row = _row(*RUNNING, mark("failed"), cleared(1, at=40), queued(2, at=41), started(2, at=42),
               succeeded(2, at=43))
    assert (row["state"], row["try_number"], row["end_date"], row["marked_at"]) == ("success", 2, 43, None)


# --- clear, kill -----------------------------------------------------------------------

@pytest.mark.parametrize("before", [[*RUNNING, failed(1)], [*RUNNING, succeeded(1)],
                                    [*RUNNING, kill_requested(1, reason="cleared"), killed(1)],
                                    [TaskUpstreamFailed(**IDS, at=5)]],
                         ids=["failed", "success", "killed", "upstream_failed"])
def test_a_cleared_instance_is_cleared_until_its_next_try_is_queued(before):
    row = _row(*before, cleared(1))
    assert (row["state"], row["cleared_at"]) == ("cleared", 40.0)
    requeued = _row(*before, cleared(1), queued(2, at=41))
    assert (requeued["state"], requeued["try_number"], requeued["cleared_at"], requeued["end_date"]) == (
        "queued", 2, None, None)


@pytest.mark.parametrize("late", [started(1, at=45), *LATE_OUTCOMES], ids=lambda event: type(event).__name__)
def test_nothing_of_a_cleared_try_changes_the_row(late):
    assert _row(*RUNNING, failed(1), cleared(1), late)["state"] == "cleared"


def test_a_clear_naming_an_older_try_is_stale():
    row = _row(*RUNNING, failed(1), cleared(1), queued(2, at=41), cleared(1, at=42))
    assert (row["state"], row["try_number"]) == ("queued", 2)


def test_a_kill_request_is_noted_and_the_try_ends_as_killed():
    asked = _row(*RUNNING, kill_requested(1, reason="killed by bob"))
    assert (asked["state"], asked["kill_requested_at"], asked["reason"]) == ("running", 21.0, "killed by bob")
    row = _row(*RUNNING, kill_requested(1, reason="killed by bob"), killed(1, reason=""))
    assert (row["state"], row["end_date"], row["reason"]) == ("killed", 22.0, "killed by bob")


def kill(request_id="k1", at=20.5):
    return KillTask(**IDS, request_id=request_id, requested_by="bob", at=at)


@pytest.mark.parametrize("outcome", [succeeded(1), failed(1), killed(1),
                                     TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1",
                                                      at=90)], ids=lambda event: type(event).__name__)
def test_a_killed_try_ends_as_killed_whatever_its_runner_reports(outcome):
    row = _row(*RUNNING, kill(), kill_requested(1, reason="killed by an operator"), outcome)
    assert (row["state"], row["kill_request_id"], row["kill_try"]) == ("killed", "k1", 1)
    assert row["end_date"] == outcome.at


def test_a_kill_of_a_try_that_is_not_queued_or_running_changes_nothing():
    row = _row(*RUNNING, failed(1), kill(), cleared(1), queued(2, at=41), succeeded(2, at=42))
    assert (row["state"], row["kill_request_id"]) == ("success", None)


def test_a_repeated_kill_request_does_not_kill_the_next_try():
    row = _row(*RUNNING, kill(), killed(1), cleared(1), queued(2, at=41), started(2, at=41.5),
               kill(at=42), succeeded(2, at=43))
    assert (row["state"], row["try_number"]) == ("success", 2)
    again = _row(*RUNNING, kill(), killed(1), cleared(1), queued(2, at=41), kill("k2", at=42), succeeded(2, at=43))
    assert again["state"] == "killed"


def test_a_mark_wins_over_a_pending_kill():
    assert _row(*RUNNING, kill(), mark("success"), succeeded(1, at=30))["state"] == "success"


def test_a_kill_request_before_any_runner_claimed_the_try_ends_it_at_once():
    row = _row(queued(1), kill_requested(1, reason="killed by bob"))
    assert (row["state"], row["end_date"], row["reason"]) == ("killed", 21.0, "killed by bob")
    late = _row(queued(1), kill_requested(1), started(1, at=23), killed(1, at=24),
                succeeded(1, at=25))  # a runner that lost the race to the kill
    assert (late["state"], late["end_date"], late["runner_id"]) == ("killed", 21.0, "w1")


def test_a_kill_request_before_the_start_of_a_marked_try_keeps_the_mark():
    row = _row(queued(1), mark("success"), kill_requested(1))
    assert (row["state"], row["kill_requested_at"]) == ("success", 21.0)


def test_a_kill_of_an_older_try_changes_nothing():
    row = _row(*RUNNING, failed(1), queued(2, at=31), kill_requested(1, at=32), killed(1, at=33))
    assert (row["state"], row["kill_requested_at"]) == ("queued", None)


@pytest.mark.parametrize(("event", "state"), [
    (TaskSkipped(**IDS, reason="upstream extract was skipped", at=50), "skipped"),
    (TaskRemoved(**IDS, reason="the DAG file no longer defines it", at=50), "removed"),
    (TaskUpstreamFailed(**IDS, reason="upstream extract failed", at=50), "upstream_failed"),
])
def test_tasks_that_will_not_run(event, state):
    row = _row(queued(1), event)
    assert (row["state"], row["end_date"]) == (state, 50)
    assert row["reason"] == getattr(event, "reason", None)


# --- history -----------------------------------------------------------------------------

def test_every_new_event_that_names_a_task_is_history():
    events = [*RUNNING, KillTask(**IDS, request_id="k1", at=20), kill_requested(1), killed(1),
              ClearTask(**IDS, request_id="c1", at=39), cleared(1), queued(2, at=41), mark("skipped", at=42),
              TaskSkipped(**IDS, at=43), TaskRemoved(**IDS, reason="gone", at=44)]
    history = _fold(*events).history
    assert [item["event_type"] for item in history] == [type(event).__name__ for event in events]
    assert history[3]["try_number"] == 1 and history[2]["try_number"] is None


def test_run_level_events_are_not_task_history():
    created = DagRunCreated(dag_id="etl", run_id="r1", logical_date=5.0, run_type="manual", dag_fingerprint="f",
                            scheduler_id="s1", at=6)
    view = _fold(created, DagRunReopened(dag_id="etl", run_id="r1", at=7))
    assert view.history == []


# --- dag_run -----------------------------------------------------------------------------

CREATED = DagRunCreated(dag_id="etl", run_id="r1", logical_date=5.0, run_type="backfill", dag_fingerprint="f",
                        scheduler_id="s1", at=6)


@pytest.mark.parametrize(("events", "expected"), [
    ([CREATED], ("running", None, None, None)),
    ([CREATED, DagRunFinished(dag_id="etl", run_id="r1", state="failed", reason="its DAG was deleted", at=8)],
     ("failed", 8, "its DAG was deleted", None)),
    ([CREATED, DagRunFinished(dag_id="etl", run_id="r1", state="failed", reason="x", at=8),
      DagRunReopened(dag_id="etl", run_id="r1", request_id="c1", at=9)], ("running", None, None, 9)),
    ([CREATED, DagRunFinished(dag_id="etl", run_id="r1", state="failed", at=8),
      DagRunReopened(dag_id="etl", run_id="r1", at=9),
      DagRunFinished(dag_id="etl", run_id="r1", state="success", at=12)], ("success", 12, None, 9)),
])
def test_a_run_reopens_and_finishes_with_a_reason(events, expected):
    row = _fold(*events).rows["dag_run"][("etl", "r1")]
    assert (row["state"], row["end_date"], row["reason"], row["reopened_at"]) == expected
    assert row["run_type"] == "backfill"
