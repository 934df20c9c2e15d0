"""Setups and teardowns in the scheduler core, as Airflow 3 runs them.

In words: a teardown (rule all_done_setup_success) runs once everything upstream of it ended, if one
of its setups succeeded, even when the work between failed; it gives up (upstream_failed) when no
setup succeeded and is skipped when every setup was skipped. A run's state is read from its tasks
but teardowns, unless a teardown has ``on_failure_fail_dagrun``. A task between a setup and its
teardown that does not have the setup as a direct upstream still waits for it (the setup
constraint): it gives up when the setup failed, is skipped when the setup was skipped, and, while
the setup has not succeeded, its own rule may still skip it or give it up but not run it. A task
with the rule ``always`` is not held by the setup constraint.
"""

from __future__ import annotations

import pytest

from schemas import TaskSkipped, TaskUpstreamFailed
from services.scheduler.core import decide
from tests.unit.control_flow_fixtures import Drive, dag, ended, of_task, running, task
from tests.unit.scheduler_fixtures import POLICY, created, names, state_of

TEARDOWN = "all_done_setup_success"


def _teardown(task_id: str, *upstream: str, fail_run: bool = False):
    return task(task_id, *upstream, rule=TEARDOWN, is_teardown=True, on_failure_fail_dagrun=fail_run)


def _scope(fail_run: bool = False):
    """make (setup) >> work >> drop (teardown of make)."""
    return dag(task("make", is_setup=True), task("work", "make"), _teardown("drop", "make", "work", fail_run=fail_run))


def test_a_teardown_runs_after_its_setup_succeeded_even_though_the_work_failed():
    drive = Drive(_scope(), outcomes={"work": "failed"}).to_the_end()
    assert drive.states() == {"make": "success", "work": "failed", "drop": "success"}
    assert drive.finished() == "failed", "the work failed: the run did, whatever its teardown did"


def test_a_teardown_waits_for_the_work_to_end():
    given = [_scope(), created(), *ended("make", "success"), *running("work")]
    assert of_task(decide(state_of(*given), now=7.0, policy=POLICY), "drop") == []


def test_the_work_and_its_teardown_give_up_when_the_setup_failed():
    drive = Drive(_scope(), outcomes={"make": "failed"}).to_the_end()
    assert drive.states() == {"make": "failed", "work": "upstream_failed", "drop": "upstream_failed"}
    gave_up = drive.decided(TaskUpstreamFailed)["drop"]
    assert gave_up.trigger_rule == TEARDOWN
    assert gave_up.upstream_states == {"make": "failed", "work": "upstream_failed"}
    assert drive.finished() == "failed"


def test_the_work_and_its_teardown_are_skipped_when_the_setup_was_skipped():
    drive = Drive(_scope(), outcomes={"make": "skipped"}).to_the_end()
    assert drive.states() == {"make": "skipped", "work": "skipped", "drop": "skipped"}
    assert drive.decided(TaskSkipped)["drop"].trigger_rule == TEARDOWN
    assert drive.finished() == "success"


@pytest.mark.parametrize(("fail_run", "run_state"), [(False, "success"), (True, "failed")])
def test_a_failed_teardown_fails_the_run_only_with_on_failure_fail_dagrun(fail_run, run_state):
    drive = Drive(_scope(fail_run=fail_run), outcomes={"drop": "failed"}).to_the_end()
    assert drive.states() == {"make": "success", "work": "success", "drop": "failed"}
    assert drive.finished() == run_state


def test_a_teardown_with_two_setups_runs_when_one_of_them_succeeded():
    definition = dag(task("one", is_setup=True), task("two", is_setup=True), task("work", "one", "two"),
                     _teardown("drop", "one", "two", "work"))
    drive = Drive(definition, outcomes={"two": "failed"}).to_the_end()
    assert drive.states() == {"one": "success", "two": "failed", "work": "upstream_failed", "drop": "success"}
    assert drive.finished() == "failed"


def test_tasks_after_a_teardown_decide_the_run_and_the_work_before_it_still_counts():
    definition = dag(task("make", is_setup=True), task("work", "make"), _teardown("drop", "make", "work"),
                     task("after", "drop", rule="all_done"))
    drive = Drive(definition, outcomes={"work": "failed"}).to_the_end()
    assert drive.states() == {"make": "success", "work": "failed", "drop": "success", "after": "success"}
    assert drive.finished() == "failed"


# -- the setup constraint: setups a task runs within that are not its direct upstreams --------------

def _within(rule: str = "one_success"):
    """make (setup) >> first >> inner >> drop (teardown); side >> inner. inner runs within make."""
    return dag(task("make", is_setup=True), task("side"), task("first", "make"),
               task("inner", "first", "side", rule=rule, setups=["make"]),
               _teardown("drop", "make", "inner"))


def test_a_task_within_a_setup_waits_for_it_though_its_own_rule_is_met():
    given = [_within(), created(), *running("make"), *ended("side", "success")]
    assert of_task(decide(state_of(*given), now=7.0, policy=POLICY), "inner") == []


def test_a_task_within_a_setup_runs_once_the_setup_succeeded():
    given = [_within(), created(), *ended("make", "success"), *ended("side", "success")]
    assert names(decide(state_of(*given), now=7.0, policy=POLICY)) == ["TaskQueued:first", "TaskQueued:inner"]


@pytest.mark.parametrize(("setup_outcome", "decided", "state"), [
    ("failed", TaskUpstreamFailed, "upstream_failed"),
    ("skipped", TaskSkipped, "skipped"),
])
def test_a_task_within_a_setup_that_did_not_succeed_does_not_run(setup_outcome, decided, state):
    drive = Drive(_within(), outcomes={"make": setup_outcome}).to_the_end()
    assert drive.states()["inner"] == state
    event = drive.decided(decided)["inner"]
    assert (event.trigger_rule, event.upstream_states) == ("setup", {"make": setup_outcome})


def test_a_task_within_a_running_setup_is_given_up_by_its_own_rule_at_once():
    """Airflow reads the task's own rule even while the setup constraint holds it: a failed direct
    upstream gives it up then, rather than when the setup ends (which could be a skip)."""
    given = [_within(rule="all_success"), created(), *running("make"), *ended("side", "failed")]
    [event] = of_task(decide(state_of(*given), now=7.0, policy=POLICY), "inner")
    assert isinstance(event, TaskUpstreamFailed)
    assert (event.trigger_rule, event.upstream_states) == ("all_success", {"first": "none", "side": "failed"})


def test_a_task_within_a_running_setup_is_skipped_by_its_own_rule_at_once():
    given = [_within(rule="none_skipped"), created(), *running("make"), *ended("side", "skipped")]
    [event] = of_task(decide(state_of(*given), now=7.0, policy=POLICY), "inner")
    assert isinstance(event, TaskSkipped) and event.trigger_rule == "none_skipped"


def test_a_task_with_rule_always_is_not_held_by_its_setup():
    given = [_within(rule="always"), created(), *running("make")]
    assert names(of_task(decide(state_of(*given), now=7.0, policy=POLICY), "inner")) == ["TaskQueued:inner"]


def test_a_scope_driven_to_its_end_runs_everything_once_the_setup_succeeded():
    drive = Drive(_within(), outcomes={"side": "failed"}).to_the_end()
    assert drive.states() == {"make": "success", "side": "failed", "first": "success", "inner": "success",
                              "drop": "success"}
    assert drive.finished() == "success", "side failed but it is not a leaf: inner (one_success) ran after it"
