"""The chaos soak's checks (tests/soak/checks.py), each fed a good and a bad history of plain values."""

from __future__ import annotations

import pytest

from schemas import (
    CommandRejected,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DeadlineMissed,
    TaskDeclaredDead,
    TaskHeartbeat,
    TaskQueued,
    TaskStarted,
    TriggerDagRun,
)
from tests.soak.checks import (
    Marker,
    deadlines_missed_twice,
    deaths_while_heartbeating,
    projections_behind,
    projections_disagree,
    runs_and_tries,
    runs_not_ended,
    tries_run_twice,
    triggers_lost,
)

TIMEOUT = 20.0


def trigger(request_id: str, dag_id: str = "d") -> TriggerDagRun:
    return TriggerDagRun(dag_id=dag_id, request_id=request_id, at=1.0)


def created(run_id: str, dag_id: str = "d") -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=1.0, run_type="manual", dag_fingerprint="f",
                         scheduler_id="s1", at=2.0)


def finished(run_id: str, dag_id: str = "d") -> DagRunFinished:
    return DagRunFinished(dag_id=dag_id, run_id=run_id, state="success", at=9.0)


def reopened(run_id: str, dag_id: str = "d") -> DagRunReopened:
    return DagRunReopened(dag_id=dag_id, run_id=run_id, request_id="clear-1", at=10.0)


def started(at: float, try_number: int = 1) -> TaskStarted:
    return TaskStarted(dag_id="d", run_id="r", task_id="t", try_number=try_number, runner_id="host:1", hostname="host",
                       pid=1, at=at)


def beat(at: float, try_number: int = 1) -> TaskHeartbeat:
    return TaskHeartbeat(dag_id="d", run_id="r", task_id="t", try_number=try_number, runner_id="host:1", at=at)


def dead(at: float, try_number: int = 1, reason: str = "no heartbeat") -> TaskDeclaredDead:
    return TaskDeclaredDead(dag_id="d", run_id="r", task_id="t", try_number=try_number, last_heartbeat_at=None,
                            reason=reason, scheduler_id="s1", at=at)


def marker(try_number: int, pid: int, at: float = 1.0, task_id: str = "t") -> Marker:
    return Marker("d", "r", task_id, try_number, pid, at)


# -- every triggered run ended ---------------------------------------------------------------


def test_runs_that_end_pass_even_after_a_clear_reopened_them():
    events = [trigger("a"), created("manual__a"), finished("manual__a"), reopened("manual__a"), finished("manual__a"),
              created("scheduled__1"), finished("scheduled__1")]
    assert runs_not_ended(events) == []


def test_a_run_triggered_but_never_created_is_a_violation():
    [violation] = runs_not_ended([trigger("a")])
    assert violation.check == "run-never-created" and "manual__a" in violation.detail


def test_a_rejected_trigger_made_no_run_and_is_not_a_violation():
    rejected = CommandRejected(dag_id="d", request_id="a", command="TriggerDagRun", reason="no DAG", scheduler_id="s1",
                               at=2.0)
    assert runs_not_ended([trigger("a"), rejected]) == []


@pytest.mark.parametrize("tail", [[], ["finished", "reopened"]], ids=["created", "reopened"])
def test_a_run_whose_last_lifecycle_event_is_not_finished_is_a_violation(tail):
    events = [trigger("a"), created("manual__a")]
    events += [finished("manual__a") if name == "finished" else reopened("manual__a") for name in tail]
    [violation] = runs_not_ended(events)
    assert violation.check == "run-not-ended" and "manual__a" in violation.detail


def test_an_acknowledged_trigger_missing_from_the_log_is_lost():
    assert triggers_lost(["a"], [trigger("a")]) == []
    [violation] = triggers_lost(["a", "b"], [trigger("a")])
    assert violation.check == "trigger-lost" and "b" in violation.detail


# -- user code ran at most once per try ------------------------------------------------------


def test_one_start_per_try_passes():
    assert tries_run_twice([marker(1, 10), marker(2, 11), marker(1, 12, task_id="u")]) == []


def test_two_starts_of_one_try_are_a_violation():
    [violation] = tries_run_twice([marker(1, 10, at=1.0), marker(1, 11, at=2.0), marker(2, 12)])
    assert violation.check == "try-ran-twice"
    assert "t try 1" in violation.detail and "10, 11" in violation.detail


# -- no try declared dead while it was heartbeating ------------------------------------------


def test_a_try_silent_for_a_timeout_is_rightly_dead():
    events = [started(0.0), dead(30.0)]
    assert deaths_while_heartbeating(events, [beat(1.0), beat(2.0)], TIMEOUT) == []


def test_a_frozen_runner_heard_from_again_after_a_whole_timeout_is_rightly_dead():
    # Beats up to 2, frozen for 40 s past the timeout, declared at 25, thawed at 42.
    assert deaths_while_heartbeating([started(0.0), dead(25.0)], [beat(2.0), beat(42.0), beat(43.0)], TIMEOUT) == []


def test_a_runner_lost_with_its_worker_may_be_declared_dead_at_once():
    # The executor's verdict hastened the end of a runner that was never heard from again.
    assert deaths_while_heartbeating([started(0.0), dead(3.0, reason="worker lost")], [beat(2.0)], TIMEOUT) == []


def test_a_try_declared_dead_while_its_heartbeats_went_on_is_a_violation():
    [violation] = deaths_while_heartbeating([started(0.0), dead(10.5)], [beat(float(at)) for at in range(1, 30)],
                                            TIMEOUT)
    assert violation.check == "dead-while-heartbeating" and "t try 1" in violation.detail


def test_heartbeats_held_back_by_an_outage_still_count_by_when_they_were_written():
    # Written at 5..15 during an outage (appended later): the declaration at 12 was wrongful.
    [violation] = deaths_while_heartbeating([started(0.0), dead(12.0)], [beat(float(at)) for at in range(5, 16)],
                                            TIMEOUT)
    assert "gap 1.0 s" in violation.detail


def test_heartbeats_of_another_try_do_not_count():
    events = [started(0.0), dead(30.0), started(31.0, try_number=2)]
    assert deaths_while_heartbeating(events, [beat(2.0), beat(32.0, try_number=2)], TIMEOUT) == []


# -- at most one DeadlineMissed per run ------------------------------------------------------


def missed(run_id: str) -> DeadlineMissed:
    return DeadlineMissed(dag_id="d", run_id=run_id, deadline=5.0, at=6.0)


def test_one_deadline_miss_per_run_passes():
    assert deadlines_missed_twice([missed("a"), missed("b"), created("c")]) == []


def test_two_deadline_misses_of_one_run_are_a_violation():
    [violation] = deadlines_missed_twice([missed("a"), missed("b"), missed("a")])
    assert violation.check == "deadline-missed-twice" and "d / a: 2" in violation.detail


# -- projections --------------------------------------------------------------------------


def test_projections_verified_pass_and_a_difference_is_a_violation():
    assert projections_disagree(0, "tables agree") == []
    [violation] = projections_disagree(1, "checking\ntask_instance: 2 rows differ\n")
    assert violation.check == "projections-disagree" and "2 rows differ" in violation.detail


def test_tables_that_show_every_ended_run_as_the_log_ended_it_pass():
    events = [created("a"), finished("a"), created("b")]  # b still runs: the tables may say anything
    assert projections_behind(events, [{"dag_id": "d", "run_id": "a", "state": "success"}]) == []


@pytest.mark.parametrize("rows", [[], [{"dag_id": "d", "run_id": "a", "state": "running"}]], ids=["missing", "stale"])
def test_tables_behind_the_log_are_a_violation(rows):
    [violation] = projections_behind([created("a"), finished("a")], rows)
    assert violation.check == "projections-behind" and "d / a" in violation.detail


def test_runs_and_tries_are_counted_once_each():
    queued = [TaskQueued(dag_id="d", run_id="r", task_id="t", try_number=number, executor="local", queue="default",
                         scheduler_id="s1", at=1.0) for number in (1, 1, 2)]
    assert runs_and_tries([created("r"), created("r"), *queued]) == (1, 2)
