"""Scheduler core: given these events, when deciding at this time, then these events."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schemas import (
    ClearTask,
    DagRunFinished,
    MarkTask,
    TaskAdopted,
    TaskDeclaredDead,
    TaskQueued,
    TaskRetryScheduled,
    TriggerDagRun,
)
from services.scheduler.core import (
    Evidence,
    Policy,
    decide,
    decide_adoption,
    evolve,
    manual_run_id,
    next_wakeup,
    orphans,
)
from tests.unit.scheduler_fixtures import (
    ME,
    POLICY,
    RUN,
    created,
    failed,
    heartbeat,
    launched,
    names,
    parsed,
    queued,
    ran,
    started,
    state_of,
    succeeded,
)

DIAMOND = {"extract": [], "left": ["extract"], "right": ["extract"], "load": ["left", "right"]}


@pytest.mark.parametrize(("given", "expected"), [
    pytest.param([parsed(edges=DIAMOND), created()], ["TaskQueued:extract"], id="roots-queued"),
    pytest.param([parsed(edges=DIAMOND), created(), *ran("extract")], ["TaskQueued:left", "TaskQueued:right"],
                 id="fan-out-after-success"),
    pytest.param([parsed(edges=DIAMOND), created(), *ran("extract"), *ran("left"), queued("right")], [],
                 id="fan-in-waits-for-all"),
    pytest.param([parsed(edges=DIAMOND), created(), *ran("extract"), *ran("left"), *ran("right")],
                 ["TaskQueued:load"], id="fan-in-ready"),
    pytest.param([parsed(edges=DIAMOND), created(), *ran("extract"), *ran("left"), *ran("right"), *ran("load")],
                 ["DagRunFinished"], id="run-succeeds"),
    pytest.param([parsed(edges=DIAMOND), created(), queued("extract")], [], id="queued-not-queued-again"),
    pytest.param([parsed(edges=DIAMOND), created(), queued("extract"), failed("extract")],
                 ["TaskUpstreamFailed:left", "TaskUpstreamFailed:right", "TaskUpstreamFailed:load",
                  "DagRunFinished"], id="upstream-failed-propagates-and-run-fails"),
    pytest.param([parsed(edges=DIAMOND, retries=1), created(), queued("extract"), failed("extract")],
                 ["TaskRetryScheduled:extract"], id="retry-instead-of-failure"),
    pytest.param([parsed(), created(), queued("a"), started("a"), succeeded("a", try_number=2)], [],
                 id="outcome-of-another-try-ignored"),
])
def test_task_decisions(given, expected):
    assert names(decide(state_of(*given), now=7.0, policy=POLICY)) == expected


def test_queued_try_carries_executor_queue_and_owner_once():
    [event] = decide(state_of(parsed(), created()), now=7.0, policy=POLICY)
    assert event == TaskQueued(dag_id="etl", run_id=RUN, task_id="a", try_number=1, executor="local",
                               queue="default", scheduler_id=ME, run_type="manual", logical_date=1.0,
                               data_interval_start=1.0, data_interval_end=1.0, at=7.0)


def test_run_outcome_is_failed_when_a_task_failed_for_good():
    state = state_of(parsed(edges={"a": [], "b": []}), created(), *ran("a"), queued("b"), failed("b"))
    assert decide(state, now=9.0, policy=POLICY)[-1] == DagRunFinished(dag_id="etl", run_id=RUN,
                                                                         state="failed", at=9.0)


class TestRetries:
    def given(self):
        return state_of(parsed(retries=2, retry_delay=10.0), created(), queued("a"), failed("a", at=6.0))

    def test_retry_waits_for_its_delay(self):
        state = self.given()
        [retry] = decide(state, now=7.0, policy=POLICY)
        assert (retry.try_number, retry.next_try_number, retry.not_before) == (1, 2, 16.0)
        evolve(state, retry)
        assert decide(state, now=15.9, policy=POLICY) == []
        assert names(decide(state, now=16.0, policy=POLICY)) == ["TaskQueued:a"]
        assert decide(state, now=16.0, policy=POLICY)[0].try_number == 2

    def test_retries_run_out(self):
        state = self.given()
        for try_number in (1, 2):
            for event in decide(state, now=100.0 * try_number, policy=POLICY):
                evolve(state, event)
            retried = decide(state, now=100.0 * try_number + 50, policy=POLICY)
            assert names(retried) == ["TaskQueued:a"]
            evolve(state, retried[0])
            evolve(state, failed("a", try_number=try_number + 1, at=100.0 * try_number + 60))
        assert names(decide(state, now=500.0, policy=POLICY)) == ["DagRunFinished"]

    def test_late_events_of_a_retried_try_change_nothing(self):
        state = self.given()
        for event in decide(state, now=7.0, policy=POLICY):
            evolve(state, event)
        evolve(state, succeeded("a", try_number=1, at=8.0))
        evolve(state, heartbeat("a", try_number=1, at=8.0))
        assert state.runs[("etl", RUN)].tasks["a"].state == "up_for_retry"


def heard(until: float, reachable_since: float = 0.0) -> Evidence:
    """Heartbeats read up to an end offset fetched at ``until``."""
    return Evidence(heard_until=until, reachable_since=reachable_since)


class TestDeadTries:
    def running(self, retries=1):
        return state_of(parsed(retries=retries), created(), queued("a"), launched("a", at=3.0),
                        started("a", at=4.0), heartbeat("a", at=20.0))

    def test_silent_past_the_timeout_is_declared_dead_with_last_heartbeat_then_retried(self):
        events = decide(self.running(), now=50.5, policy=POLICY, evidence=heard(50.5))
        assert names(events) == ["TaskDeclaredDead:a", "TaskRetryScheduled:a"]
        assert events[0] == TaskDeclaredDead(dag_id="etl", run_id=RUN, task_id="a", try_number=1,
                                             last_heartbeat_at=20.0, reason="no heartbeat for 30 s",
                                             scheduler_id=ME, at=50.5)

    def test_not_dead_within_the_timeout(self):
        assert decide(self.running(), now=49.9, policy=POLICY, evidence=heard(49.9)) == []

    def test_dead_without_retries_fails_the_run(self):
        assert names(decide(self.running(retries=0), now=51.0, policy=POLICY, evidence=heard(51.0))) == [
            "TaskDeclaredDead:a", "DagRunFinished"]

    def test_queued_try_waiting_for_a_slot_is_never_dead(self):
        state = state_of(parsed(), created(), queued("a", at=2.0))
        assert decide(state, now=1000.0, policy=POLICY, evidence=heard(1000.0)) == []

    def test_a_late_success_after_being_declared_dead_changes_nothing(self):
        state = self.running(retries=0)
        for event in decide(state, now=51.0, policy=POLICY, evidence=heard(51.0))[:1]:
            evolve(state, event)
        evolve(state, succeeded("a", at=52.0))
        assert state.runs[("etl", RUN)].tasks["a"].state == "failed"

    @pytest.mark.parametrize("evidence", [None, heard(49.0), heard(30.0)], ids=["none", "before", "old"])
    def test_past_the_deadline_by_the_clock_but_not_by_the_log_is_not_dead(self, evidence):
        # A broker outage: the clock says 1000 s, but heartbeats were read only up to ``evidence``.
        assert decide(self.running(), now=1000.0, policy=POLICY, evidence=evidence) == []

    def test_after_an_outage_runners_get_a_whole_timeout_to_deliver_their_backlog(self):
        # Broker back at 900; heartbeats read up to 920 show nothing: not dead before 930.
        assert decide(self.running(), now=920.0, policy=POLICY, evidence=heard(920.0, 900.0)) == []
        assert names(decide(self.running(), now=931.0, policy=POLICY, evidence=heard(931.0, 900.0))) == [
            "TaskDeclaredDead:a", "TaskRetryScheduled:a"]

    def test_a_backlog_heartbeat_read_after_the_outage_keeps_the_try_alive(self):
        state = self.running()
        evolve(state, heartbeat("a", at=915.0))  # written during the outage, delivered after it
        assert decide(state, now=940.0, policy=POLICY, evidence=heard(940.0, 900.0)) == []

    def test_next_wakeup_leaves_out_times_already_past(self):
        state = self.running()
        assert next_wakeup(state, 30.0, now=10.0) == 50.0
        assert next_wakeup(state, 30.0, now=60.0) is None


class TestClaims:
    """The first TaskStarted of a try in log order is its claim; other runners stood down."""

    def test_a_second_started_of_the_same_try_changes_nothing(self):
        state = state_of(parsed(), created(), queued("a"), started("a", at=4.0, runner_id="r1"),
                         started("a", at=5.0, runner_id="r2"))
        instance = state.runs[("etl", RUN)].tasks["a"]
        assert (instance.runner_id, instance.started_at) == ("r1", 4.0)

    def test_heartbeats_and_outcomes_of_a_runner_that_lost_the_claim_are_ignored(self):
        state = state_of(parsed(), created(), queued("a"), started("a", at=4.0, runner_id="r1"),
                         heartbeat("a", at=40.0, runner_id="r2"), succeeded("a", at=41.0, runner_id="r2"))
        instance = state.runs[("etl", RUN)].tasks["a"]
        assert (instance.state, instance.last_heartbeat_at) == ("running", None)

    def test_the_first_launch_names_the_handle_once(self):
        state = state_of(parsed(), created(), queued("a"), launched("a", handle="1@h:1"),
                         launched("a", handle="2@h:2"))
        assert state.runs[("etl", RUN)].tasks["a"].handle == "1@h:1"


class TestFailingForGood:
    def test_a_try_that_raised_airflow_fail_exception_is_not_retried_whatever_retries_are_left(self):
        state = state_of(parsed(edges={"a": []}, retries=3), created(), queued("a"), started("a"),
                         replace(failed("a"), retryable=False))
        decided = decide(state, now=7.0, policy=POLICY)
        assert not [event for event in decided if isinstance(event, TaskRetryScheduled)]
        assert [(type(event).__name__, event.state) for event in decided if isinstance(event, DagRunFinished)] == [
            ("DagRunFinished", "failed")]

    def test_another_failure_is_retried(self):
        state = state_of(parsed(edges={"a": []}, retries=3), created(), queued("a"), started("a"), failed("a"))
        assert [type(event).__name__ for event in decide(state, now=7.0, policy=POLICY)] == ["TaskRetryScheduled"]


class TestAdoption:
    def taken_over(self):
        # "old" queued and launched both tries; "a" is still running, "b" never launched.
        return state_of(parsed(edges={"a": [], "b": []}), created(), queued("a", owner="old"),
                        launched("a", handle="11@h:7", owner="old"), started("a", executor="celery", queue="x"),
                        queued("b", owner="old"))

    def test_orphans_use_executor_from_task_queued_not_from_the_worker(self):
        [orphan] = orphans(self.taken_over(), ME)
        assert (orphan.key, orphan.executor, orphan.handle, orphan.owner) == (("etl", RUN, "a"), "local",
                                                                               "11@h:7", "old")

    def test_alive_orphans_are_adopted(self):
        events = decide_adoption(self.taken_over(), 60.0, ME, {("etl", RUN, "a"): True})
        assert events == [TaskAdopted(dag_id="etl", run_id=RUN, task_id="a", try_number=1, handle="11@h:7",
                                      by_scheduler=ME, from_scheduler="old", at=60.0)]

    @pytest.mark.parametrize("alive", [False, None])
    def test_others_wait_for_the_heartbeat_deadline(self, alive):
        state = self.taken_over()
        assert decide_adoption(state, 10.0, ME, {("etl", RUN, "a"): alive}) == []
        assert decide(state, now=10.0, policy=POLICY, evidence=heard(10.0)) == []
        assert names(decide(state, now=35.0, policy=POLICY, evidence=heard(35.0))) == ["TaskDeclaredDead:a"]

    def test_adopted_tries_are_not_orphans_any_more(self):
        state = self.taken_over()
        for event in decide_adoption(state, 60.0, ME, {("etl", RUN, "a"): True}):
            evolve(state, event)
        assert orphans(state, ME) == []

    def test_a_try_whose_launch_was_never_recorded_is_adopted_by_its_claimants_own_handle(self):
        # "old" launched "a" and died before its TaskLaunched committed; the runner's claim names its handle.
        state = state_of(parsed(edges={"a": []}), created(), queued("a", owner="old"),
                         started("a", handle="12@h:9"))
        [orphan] = orphans(state, ME)
        assert (orphan.key, orphan.handle, orphan.owner) == (("etl", RUN, "a"), "12@h:9", "old")
        [adopted] = decide_adoption(state, 60.0, ME, {("etl", RUN, "a"): True})
        assert (adopted.handle, adopted.from_scheduler, adopted.by_scheduler) == ("12@h:9", "old", ME)

    def test_the_claimants_handle_stays_whatever_launch_is_read_before_or_after_it(self):
        # A successor launched the try again: its runner stood down; the claimant's process does the work.
        after = state_of(parsed(edges={"a": []}), created(), queued("a"), started("a", handle="12@h:9"),
                         launched("a", handle="13@h:10"))
        before = state_of(parsed(edges={"a": []}), created(), queued("a"), launched("a", handle="13@h:10"),
                          started("a", handle="12@h:9"))
        for state in (after, before):
            instance = state.runs[("etl", RUN)].tasks["a"]
            assert (instance.handle, instance.launched_at is not None) == ("12@h:9", True)
        older_runner = state_of(parsed(edges={"a": []}), created(), queued("a"), launched("a", handle="13@h:10"),
                                started("a"))  # a TaskStarted v2 states no handle: the launch's stays
        assert older_runner.runs[("etl", RUN)].tasks["a"].handle == "13@h:10"


class TestCommands:
    def test_trigger_creates_a_run_with_an_id_derived_from_the_request(self):
        trigger = TriggerDagRun(dag_id="etl", request_id="req-9", conf_json='{"x": 1}', at=5.0)
        [event] = decide(state_of(parsed(), trigger), now=6.0, policy=POLICY)
        assert (event.run_id, event.run_type, event.conf_json, event.logical_date) == (
            manual_run_id("req-9"), "manual", '{"x": 1}', 5.0)

    def test_trigger_waits_for_max_active_runs(self):
        trigger = TriggerDagRun(dag_id="etl", request_id="req-9", at=5.0)
        state = state_of(parsed(max_active_runs=1), created(run_id="other"), queued("a", run_id="other"), trigger)
        assert names(decide(state, now=6.0, policy=POLICY)) == []

    def test_trigger_of_an_existing_run_is_ignored(self):
        trigger = TriggerDagRun(dag_id="etl", request_id="r1", at=5.0)
        state = state_of(parsed(), created(run_id=manual_run_id("r1")), queued("a"), trigger)
        assert decide(state, now=6.0, policy=POLICY) == []


def test_retry_scheduled_echo_of_an_older_try_is_ignored():
    state = state_of(parsed(retries=2), created(), queued("a"), failed("a"))
    retry = TaskRetryScheduled(dag_id="etl", run_id=RUN, task_id="a", try_number=1, next_try_number=2,
                               not_before=0.0, at=7.0)
    evolve(state, retry)
    evolve(state, queued("a", try_number=2, at=8.0))
    evolve(state, retry)
    assert state.runs[("etl", RUN)].tasks["a"].state == "queued"


class TestStartTimeout:
    """A launched try waiting for its runner (a Celery queue behind busy workers, a pending pod) has the
    start timeout; once its runner started, the heartbeat timeout runs from its last sign of life."""

    def test_a_launched_try_not_started_is_not_overdue_at_the_heartbeat_timeout(self):
        from services.scheduler.core import overdue_tries

        state = state_of(parsed(), created(), queued("a"), launched("a", at=3.0))
        assert overdue_tries(state, 3.0 + 31, 30.0, start_timeout=600.0) == set()
        assert overdue_tries(state, 3.0 + 601, 30.0, start_timeout=600.0) == {("etl", RUN, "a")}

    def test_once_started_the_heartbeat_timeout_applies(self):
        from services.scheduler.core import overdue_tries

        state = state_of(parsed(), created(), queued("a"), launched("a", at=3.0), started("a", at=4.0))
        assert overdue_tries(state, 4.0 + 31, 30.0, start_timeout=600.0) == {("etl", RUN, "a")}

    def test_the_death_says_which_wait_ran_out(self):
        state = state_of(parsed(), created(), queued("a"), launched("a", at=3.0))
        policy = Policy(scheduler_id=ME, heartbeat_timeout=30.0, start_timeout=600.0)
        [dead, *_rest] = decide(state, 700.0, policy, evidence=Evidence(heard_until=700.0))
        assert dead.reason == "launched and not started within 600 s"
