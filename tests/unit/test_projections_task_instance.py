"""task_instance and task_event: given these events of a task instance, then this row."""

from __future__ import annotations

import pytest

from projections.view import fold
from schemas import (
    PodFinished,
    TaskAdopted,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskFailed,
    TaskHeartbeat,
    TaskQueued,
    TaskRetryScheduled,
    TaskStarted,
    TaskSucceeded,
    TaskUpstreamFailed,
)
from tests.unit.projection_logs import LogBuilder, lifecycle

KEY = ("etl", "r1", "load", -1)
IDS = {"dag_id": "etl", "run_id": "r1", "task_id": "load"}


def _row(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    view = fold(builder.records)
    return view.rows["task_instance"][KEY], view.history


def _queued(n, at=10.0):
    return TaskQueued(**IDS, try_number=n, executor="celery", queue="q", scheduler_id="s1", at=at)


def _started(n, at=11.0):
    return TaskStarted(**IDS, try_number=n, runner_id=f"w{n}", hostname="h", pid=7, at=at)


@pytest.mark.parametrize(("events", "state"), [
    ([_queued(1)], "queued"),
    ([_queued(1), _started(1)], "running"),
    ([_queued(1), _started(1), TaskSucceeded(**IDS, try_number=1, runner_id="w1", at=12)], "success"),
    ([_queued(1), _started(1), TaskFailed(**IDS, try_number=1, runner_id="w1", error="x", at=12)], "failed"),
    ([_queued(1), _started(1), TaskFailed(**IDS, try_number=1, runner_id="w1", error="x", at=12),
      TaskRetryScheduled(**IDS, try_number=1, next_try_number=2, not_before=20, at=12)], "up_for_retry"),
    ([_queued(1), _started(1), TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1",
                                                 at=70)], "dead"),
    ([_queued(1), TaskAdopted(**IDS, try_number=1, handle="pod-1", by_scheduler="s2", from_scheduler="s1",
                              at=30)], "running"),
    ([TaskUpstreamFailed(**IDS, at=5)], "upstream_failed"),
    # A try declared dead stays dead: its claimant's late outcome is history, as the scheduler folds it
    # (a frozen runner thawed after its owner gave it up and retried it; found by the soak's checks).
    ([_queued(1), _started(1), TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1", at=70),
      TaskSucceeded(**IDS, try_number=1, runner_id="w1", at=75)], "dead"),
    ([_queued(1), _started(1), TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1", at=70),
      TaskRetryScheduled(**IDS, try_number=1, next_try_number=2, not_before=80, at=70),
      TaskFailed(**IDS, try_number=1, runner_id="w1", error="late", at=75)], "up_for_retry"),
    ([_queued(1), _started(1), TaskSucceeded(**IDS, try_number=1, runner_id="w1", at=12),
      TaskFailed(**IDS, try_number=1, runner_id="w1", error="x", at=13)], "success"),
])
def test_state_follows_the_lifecycle(events, state):
    row, _history = _row(*events)
    assert row["state"] == state


def test_queued_writes_who_owns_the_try():
    row, _history = _row(_queued(1))
    assert (row["try_number"], row["executor"], row["queue"], row["scheduler_id"]) == (1, "celery", "q", "s1")


def test_adoption_moves_ownership_and_handle():
    row, _ = _row(_queued(1), TaskAdopted(**IDS, try_number=1, handle="pod-1", by_scheduler="s2",
                                         from_scheduler="s1", at=30))
    assert (row["scheduler_id"], row["handle"]) == ("s2", "pod-1")


def test_events_of_an_old_try_change_nothing_but_are_history():
    dead = TaskDeclaredDead(**IDS, try_number=1, reason="silent", scheduler_id="s1", at=70)
    late = TaskSucceeded(**IDS, try_number=1, runner_id="w1", at=80)  # the old runner finally reports
    row, history = _row(_queued(1), _started(1), dead, _queued(2, at=75), _started(2, at=76), late)
    assert (row["state"], row["try_number"], row["runner_id"]) == ("running", 2, "w2")
    assert [item["event_type"] for item in history][-1] == "TaskSucceeded"
    assert len(history) == 6


def test_a_stale_queued_decision_is_ignored():
    row, _ = _row(_queued(2, at=20), _queued(1, at=30))
    assert (row["try_number"], row["queued_at"]) == (2, 20)


def test_a_new_try_clears_the_previous_tries_runner_columns():
    row, _ = _row(_queued(1), _started(1), _queued(2, at=40))
    assert (row["state"], row["hostname"], row["start_date"]) == ("queued", None, None)


def test_heartbeats_keep_the_latest_of_the_highest_try_whatever_their_order():
    beats = [TaskHeartbeat(**IDS, try_number=n, runner_id="w", at=at) for n, at in [(1, 50), (2, 45), (2, 47)]]
    rows = {_row(_queued(2), *order)[0]["last_heartbeat"] for order in (beats, beats[::-1])}
    assert rows == {47}


def test_history_is_in_log_order_and_skips_heartbeats():
    _row_, history = _row(*lifecycle("etl", "r1", "load", 1, at=10.0))
    assert [item["event_type"] for item in history] == ["TaskQueued", "TaskLaunched", "TaskStarted",
                                                        "TaskSucceeded"]
    assert [item["offset"] for item in history] == sorted(item["offset"] for item in history)


def test_pod_finished_is_history_only():
    pod = PodFinished(**IDS, try_number=1, pod_name="p", phase="Failed", reason="OOMKilled", at=20)
    row, history = _row(_queued(1), _started(1), pod)
    assert row["state"] == "running"
    assert history[-1]["event_type"] == "PodFinished" and '"OOMKilled"' in history[-1]["payload_json"]


def test_a_task_deadline_miss_is_history_only():
    missed = TaskDeadlineMissed(**IDS, deadline=20.0, at=20.5)
    row, history = _row(_queued(1), _started(1), missed)
    assert row["state"] == "running"
    assert history[-1]["event_type"] == "TaskDeadlineMissed" and '"deadline":20.0' in history[-1]["payload_json"]


def test_a_second_launch_that_lost_the_claim_changes_nothing():
    late = TaskStarted(**IDS, try_number=1, runner_id="loser", hostname="other", pid=9, at=13.0)
    row, _history = _row(_queued(1), _started(1), TaskSucceeded(**IDS, try_number=1, runner_id="w1", at=12), late,
                         TaskFailed(**IDS, try_number=1, runner_id="loser", error="x", at=14))
    assert (row["state"], row["runner_id"], row["hostname"], row["pid"]) == ("success", "w1", "h", 7)
