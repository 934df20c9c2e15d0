"""The chaos soak's checks (tests/soak/checks.py), each fed a good and a bad history of plain values."""

from __future__ import annotations

from collections import Counter

import pytest

from schemas import (
    CommandRejected,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DeadlineMissed,
    MarkTask,
    SchedulerHeartbeat,
    TaskCleared,
    TaskDeclaredDead,
    TaskHeartbeat,
    TaskLaunched,
    TaskQueued,
    TaskRetryScheduled,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from tests.soak.checks import (
    Exit,
    Marker,
    deadlines_missed_twice,
    deaths_while_heartbeating,
    ended_on_their_own,
    projections_behind,
    projections_disagree,
    runs_and_tries,
    runs_not_ended,
    tries_run_twice,
    triggers_lost,
)
from tests.soak.outcomes import (
    late_outcomes,
    late_successes_in_tables,
    launched_but_never_queued,
    successes_that_did_not_count,
)
from tests.soak.tallies import frozen_runners, takeovers

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


def started(at: float, try_number: int = 1, task_id: str = "t", runner_id: str = "host:1", pid: int = 1) -> TaskStarted:
    return TaskStarted(dag_id="d", run_id="r", task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname="host", pid=pid, at=at)


def beat(at: float, try_number: int = 1, runner_id: str = "host:1") -> TaskHeartbeat:
    return TaskHeartbeat(dag_id="d", run_id="r", task_id="t", try_number=try_number, runner_id=runner_id, at=at)


def dead(at: float, try_number: int = 1, reason: str = "no heartbeat", task_id: str = "t") -> TaskDeclaredDead:
    return TaskDeclaredDead(dag_id="d", run_id="r", task_id=task_id, try_number=try_number, last_heartbeat_at=None,
                            reason=reason, scheduler_id="s1", at=at)


def queued(task_id: str, try_number: int = 1, at: float = 1.0) -> TaskQueued:
    return TaskQueued(dag_id="d", run_id="r", task_id=task_id, try_number=try_number, executor="local",
                      queue="default", scheduler_id="s1", at=at)


def succeeded(task_id: str, try_number: int = 1, runner_id: str = "host:1", at: float = 5.0) -> TaskSucceeded:
    return TaskSucceeded(dag_id="d", run_id="r", task_id=task_id, try_number=try_number, runner_id=runner_id, at=at)


def run_finished(state: str = "success") -> DagRunFinished:
    return DagRunFinished(dag_id="d", run_id="r", state=state, at=50.0)


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


def test_a_frozen_runner_declared_dead_before_its_timeout_ran_out_is_a_violation():
    # Beats up to 2, frozen until 40 (a silence past the timeout), but declared at 8: the deadline
    # (22) had not passed, and the runner was not gone (heard again at 40).
    [violation] = deaths_while_heartbeating([started(0.0), dead(8.0)], [beat(1.0), beat(2.0), beat(40.0)], TIMEOUT)
    assert violation.check == "dead-while-heartbeating" and "6.0 s into a silence of 38.0 s" in violation.detail


def test_a_heartbeat_written_just_before_the_freeze_and_sent_after_it_is_within_the_grace():
    # The beat of 3.0 was built as the runner froze and reached the log at the thaw; the scheduler
    # had seen 2.0 and rightly declared at 22.5.
    assert deaths_while_heartbeating([started(0.0), dead(22.5)], [beat(2.0), beat(3.0), beat(41.0)], TIMEOUT) == []


def test_heartbeats_of_a_runner_that_lost_the_claim_are_not_signs_of_the_try():
    # Runner host:1 claimed the try and went silent; a second launch (host:2, lost the claim) kept
    # writing: the death is rightful, and would be wrongful had host:1 written those beats.
    events = [started(0.0), started(0.5, runner_id="host:2"), dead(25.0)]
    others = [beat(float(at), runner_id="host:2") for at in range(1, 30)]
    assert deaths_while_heartbeating(events, [beat(2.0), *others], TIMEOUT) == []
    assert deaths_while_heartbeating(events, [beat(2.0), *[beat(float(at)) for at in range(3, 30)]], TIMEOUT)


# -- an outcome that does not count changes nothing ------------------------------------------

UPSTREAM = {"d": {"u": [], "t": ["u"]}}  # t waits for u


def test_tasks_queued_after_their_upstream_succeeded_and_a_run_of_successes_pass():
    events = [queued("u"), started(2.0, task_id="u"), succeeded("u"), queued("t", at=6.0), started(7.0),
              succeeded("t", at=8.0), run_finished()]
    assert successes_that_did_not_count(events, UPSTREAM) == []


def test_a_retry_that_succeeded_after_a_death_lets_the_downstream_go():
    events = [queued("u"), started(2.0, task_id="u"), dead(25.0, task_id="u"), succeeded("u", at=30.0),
              queued("u", try_number=2, at=31.0), started(32.0, try_number=2, task_id="u", runner_id="host:3"),
              succeeded("u", try_number=2, runner_id="host:3", at=34.0), queued("t", at=35.0)]
    assert successes_that_did_not_count(events, UPSTREAM) == []


def test_a_task_queued_on_the_late_success_of_a_try_declared_dead_is_a_violation():
    # u's runner was frozen past the timeout, declared dead, thawed and reported success: that success
    # does not count, so t must not have been queued on it.
    events = [queued("u"), started(2.0, task_id="u"), dead(25.0, task_id="u"), succeeded("u", at=30.0),
              queued("t", at=31.0)]
    [violation] = successes_that_did_not_count(events, UPSTREAM)
    assert violation.check == "queued-before-upstream-succeeded"
    assert "u try 1 ended TaskDeclaredDead (a later success of that try does not count)" in violation.detail


def test_a_success_from_a_runner_that_lost_the_claim_does_not_count():
    events = [queued("u"), started(2.0, task_id="u"), started(2.5, task_id="u", runner_id="host:2"),
              succeeded("u", runner_id="host:2"), queued("t", at=6.0)]
    [violation] = successes_that_did_not_count(events, UPSTREAM)
    assert "u try 1 had not ended" in violation.detail


def test_a_task_queued_while_its_upstream_was_cleared_is_a_violation():
    clear = TaskCleared(dag_id="d", run_id="r", task_id="u", try_number=1, request_id="c1", at=10.0)
    events = [queued("u"), started(2.0, task_id="u"), succeeded("u"), clear, queued("t", at=11.0)]
    [violation] = successes_that_did_not_count(events, UPSTREAM)
    assert "u try 1 was cleared" in violation.detail


def test_a_run_that_finished_success_on_a_late_success_is_a_violation():
    events = [queued("u"), started(2.0, task_id="u"), succeeded("u"), queued("t", at=6.0), started(7.0),
              dead(30.0), succeeded("t", at=40.0), run_finished()]
    [violation] = successes_that_did_not_count(events, UPSTREAM)
    assert violation.check == "run-succeeded-without-success"
    assert "task t try 1 ended TaskDeclaredDead" in violation.detail


def test_a_retry_is_not_judged_by_its_upstream_a_new_try_after_a_clear_is():
    # u is cleared and runs again; t's retry (its own first try failed) may go meanwhile, but a new
    # try of t after a clear of t waits for u.
    clear_u = TaskCleared(dag_id="d", run_id="r", task_id="u", try_number=1, request_id="c1", at=10.0)
    clear_t = TaskCleared(dag_id="d", run_id="r", task_id="t", try_number=2, request_id="c2", at=13.0)
    retry = TaskRetryScheduled(dag_id="d", run_id="r", task_id="t", try_number=1, next_try_number=2, not_before=11.0,
                               at=10.5)
    events = [queued("u"), started(2.0, task_id="u"), succeeded("u"), queued("t", at=6.0), clear_u,
              queued("u", try_number=2, at=10.2), retry, queued("t", try_number=2, at=11.0)]
    assert successes_that_did_not_count(events, UPSTREAM) == []
    [violation] = successes_that_did_not_count([*events, clear_t, queued("t", try_number=3, at=14.0)], UPSTREAM)
    assert "t try 3 queued" in violation.detail and "u try 2 had not ended" in violation.detail


def test_an_upstream_that_ran_without_being_queued_is_named_so():
    events = [started(2.0, task_id="u"), succeeded("u"), queued("t", at=6.0)]
    [violation] = successes_that_did_not_count(events, UPSTREAM)
    assert "u was never queued (yet try 1 ran and ended TaskSucceeded)" in violation.detail


def test_a_launch_follows_the_tries_taskqueued_in_the_log():
    def launched(try_number: int) -> TaskLaunched:
        return TaskLaunched(dag_id="d", run_id="r", task_id="t", try_number=try_number, executor="kubernetes",
                            handle=f"pod-{try_number}", scheduler_id="s1", at=3.0)

    assert launched_but_never_queued([queued("t"), launched(1)]) == []
    # Try 2's TaskQueued was in a transaction that aborted: the launch acted on it anyway.
    [violation] = launched_but_never_queued([queued("t"), launched(1), launched(2), launched(2)])
    assert violation.check == "launched-but-never-queued" and "t try 2 launched by s1" in violation.detail


def test_a_failed_run_and_marked_tasks_are_not_judged():
    mark = MarkTask(dag_id="d", run_id="r", task_id="u", state="success", request_id="m1", at=3.0)
    assert successes_that_did_not_count([queued("u"), run_finished("failed")], UPSTREAM) == []
    assert successes_that_did_not_count([queued("u"), mark, queued("t", at=4.0)], UPSTREAM) == []
    assert successes_that_did_not_count([queued("u"), queued("t")], {}) == []  # a DAG not known


def row(state: str, try_number: int = 1) -> dict:
    return {"dag_id": "d", "run_id": "r", "task_id": "t", "state": state, "try_number": try_number}


def test_late_outcomes_are_those_after_the_one_that_counts():
    late = succeeded("t", at=40.0)
    assert late_outcomes([queued("t"), started(2.0), dead(30.0), late]) == [late]
    assert late_outcomes([queued("t"), started(2.0), succeeded("t")]) == []


def test_tables_showing_success_for_a_try_that_succeeded_pass():
    assert late_successes_in_tables([queued("t"), started(2.0), succeeded("t")], [row("success")]) == []


def test_tables_showing_the_late_success_of_a_try_declared_dead_are_a_violation():
    events = [queued("t", try_number=4), started(2.0, try_number=4), dead(30.0, try_number=4),
              succeeded("t", try_number=4, at=40.0)]
    assert late_successes_in_tables(events, [row("dead", 4)]) == []
    [violation] = late_successes_in_tables(events, [row("success", 4)])
    assert violation.check == "late-success-counted" and "TaskDeclaredDead at 30.000" in violation.detail


# -- no service ended on its own -------------------------------------------------------------


def test_a_service_that_ended_on_its_own_is_a_violation_naming_its_kind_and_log():
    assert ended_on_their_own([]) == []
    [violation] = ended_on_their_own([Exit("host-a", "celery-worker", 1, 100.0, "ready.\nConnectionError: redis\n")])
    assert violation.check == "ended-on-its-own"
    assert "celery-worker host-a exited 1" in violation.detail and "ConnectionError: redis" in violation.detail


# -- tallies for the report ------------------------------------------------------------------


def test_tries_of_runners_frozen_past_the_timeout_are_tallied_by_what_became_of_them():
    events = [started(1.0, pid=7), started(2.0, task_id="u", pid=7), succeeded("u", at=3.0),  # u ended before
              started(4.0, task_id="w", pid=7), dead(30.0), succeeded("t", at=41.0)]
    counts = frozen_runners(events, [(7, 10.0, 40.0)])
    assert counts == {"tries": 2, "declared dead": 1, "not ended": 1, "late outcomes": 1}


def test_a_takeover_during_a_scheduler_freeze_is_tallied():
    def owns(scheduler_id: str, partitions: list[int], at: float) -> SchedulerHeartbeat:
        return SchedulerHeartbeat(scheduler_id=scheduler_id, hostname="h", pid=1, partitions=partitions, at=at)

    beats = [owns("s1", [0, 1], 1.0), owns("s2", [2, 3], 1.0), owns("s2", [0, 1, 2, 3], 15.0)]
    assert takeovers(beats, [("s1", 5.0, 20.0)]) == {"frozen": 1, "taken over": 1}
    assert takeovers(beats, [("s1", 5.0, 12.0)]) == {"frozen": 1, "taken over": 0}


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


def test_the_report_gives_minutes_faults_runs_tries_violations_by_check_and_self_exits(tmp_path):
    from tests.soak.checks import Violation
    from tests.soak.harness import SoakResult

    result = SoakResult(3.0, 7, tmp_path, faults={"scheduler": Counter({"kill": 1, "long freeze": 2}),
                                                   "redis": Counter({"restart": 1})}, runs=30, tries=90)
    result.exits = [Exit("host-a", "celery-worker", 1, 100.0), Exit("host-b", "celery-worker", 1, 200.0)]
    result.violations = [*ended_on_their_own(result.exits), Violation("try-ran-twice", "d / r / t try 1")]
    report = result.report()
    assert "3.0 minutes" in report and "faults injected: 4 (kill 1, long freeze 2, restart 1)" in report
    assert "  scheduler: kill 1, long freeze 2" in report and "runs: 30, tries: 90" in report
    assert "self-exits: celery-worker ×2" in report
    assert "violations: 3 (ended-on-its-own 2, try-ran-twice 1)" in report
