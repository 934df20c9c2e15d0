"""EmptyOperator instances and tries that end skipped, in the scheduler core.

An EmptyOperator has nothing to run: once its trigger rule lets it run, the owner ends it with
TaskEmptySucceeded, no try queued (Airflow's scheduler marks such tasks success without sending them
to an executor), and its downstream tasks go on in the same walk. A try whose code raised the skip
exception ends with TaskTrySkipped: the task instance is skipped (never retried), and its downstream
tasks read "skipped" through their trigger rules.
"""

from __future__ import annotations

from schemas import PauseDag, TaskEmptySucceeded, TaskSkipped
from services.scheduler.core import decide, evolve
from tests.unit.control_flow_fixtures import Drive, dag, ended, skipped, task, try_skipped
from tests.unit.scheduler_fixtures import POLICY, RUN, created, failed, names, queued, started, state_of


def _empty(task_id: str, *upstream: str, rule: str = "all_success"):
    return task(task_id, *upstream, rule=rule, kind="empty")


# -- EmptyOperator -----------------------------------------------------------------------------------

def test_an_empty_task_succeeds_without_a_try_and_its_downstream_is_queued_in_the_same_walk():
    given = [dag(_empty("start"), task("a", "start")), created()]
    decided = decide(state_of(*given), now=7.0, policy=POLICY)
    assert names(decided) == ["TaskEmptySucceeded:start", "TaskQueued:a"]
    assert decided[0] == TaskEmptySucceeded(dag_id="etl", run_id=RUN, task_id="start", scheduler_id=POLICY.scheduler_id,
                                            at=7.0)


def test_a_dag_of_empty_tasks_ends_in_one_walk():
    given = [dag(_empty("start"), _empty("mid", "start"), _empty("end", "mid")), created()]
    assert names(decide(state_of(*given), now=7.0, policy=POLICY)) == [
        "TaskEmptySucceeded:start", "TaskEmptySucceeded:mid", "TaskEmptySucceeded:end", "DagRunFinished"]


def test_an_empty_task_folds_to_success_with_no_try_and_once():
    state = state_of(dag(_empty("start"), task("a", "start")), created())
    event = TaskEmptySucceeded(dag_id="etl", run_id=RUN, task_id="start", scheduler_id="s", at=7.0)
    evolve(evolve(state, event), event)
    instance = state.runs[("etl", RUN)].tasks["start"]
    assert (instance.state, instance.try_number, instance.ended_at) == ("success", 0, 7.0)
    assert names(decide(state, now=8.0, policy=POLICY)) == ["TaskQueued:a"]


def test_an_empty_task_already_skipped_is_not_made_a_success():
    state = state_of(dag(_empty("start")), created(), skipped("start"))
    evolve(state, TaskEmptySucceeded(dag_id="etl", run_id=RUN, task_id="start", scheduler_id="s", at=7.0))
    assert state.runs[("etl", RUN)].tasks["start"].state == "skipped"


def test_an_empty_task_follows_its_rule_it_gives_up_or_is_skipped_like_any_task():
    definition = dag(task("a"), task("b"), _empty("after_a", "a"), _empty("join", "a", "b", rule="none_failed"),
                     _empty("lonely", "b", rule="all_failed"))
    given = [definition, created(), *ended("a", "failed"), *ended("b", "success")]
    assert names(decide(state_of(*given), now=7.0, policy=POLICY)) == [
        "TaskUpstreamFailed:after_a", "TaskUpstreamFailed:join", "TaskSkipped:lonely", "DagRunFinished"]


def test_an_empty_join_after_a_branch_succeeds_and_its_downstream_runs():
    definition = dag(task("branch", kind="python", chooses="branch"), task("a", "branch"), task("b", "branch"),
                     _empty("join", "a", "b", rule="none_failed_min_one_success"), task("report", "join"))
    drive = Drive(definition, follows={"branch": ["b"]}).to_the_end()
    assert drive.states() == {"branch": "success", "a": "skipped", "b": "success", "join": "success",
                              "report": "success"}
    assert "join" in drive.decided(TaskEmptySucceeded)
    assert not any(event.task_id == "join" for event in drive.log if type(event).__name__ == "TaskQueued")


def test_a_paused_dag_does_not_end_its_empty_tasks():
    given = [dag(_empty("start")), created(), PauseDag(dag_id="etl", paused=True, at=2.0)]
    assert decide(state_of(*given), now=7.0, policy=POLICY) == []


# -- TaskTrySkipped ----------------------------------------------------------------------------------

def test_a_try_ending_skipped_makes_the_task_skipped_not_retried():
    definition = dag(task("a", retries=3))
    state = state_of(definition, created(), queued("a"), started("a"), try_skipped("a"))
    instance = state.runs[("etl", RUN)].tasks["a"]
    assert (instance.state, instance.try_number) == ("skipped", 1)
    assert names(decide(state, now=7.0, policy=POLICY)) == ["DagRunFinished"]
    assert decide(state, now=7.0, policy=POLICY)[0].state == "success"


def test_downstream_tasks_read_a_skipped_try_through_their_rules():
    definition = dag(task("a"), task("strict", "a"), task("lenient", "a", rule="none_failed"),
                     task("done", "a", rule="all_done"), task("only_if_skipped", "a", rule="all_skipped"),
                     task("on_failure", "a", rule="one_failed"))
    given = [definition, created(), queued("a"), started("a"), try_skipped("a")]
    decided = decide(state_of(*given), now=7.0, policy=POLICY)
    assert names(decided) == ["TaskQueued:done", "TaskQueued:lenient", "TaskSkipped:on_failure",
                              "TaskQueued:only_if_skipped", "TaskSkipped:strict"]
    strict = decided[-1]
    assert isinstance(strict, TaskSkipped)
    assert (strict.trigger_rule, strict.upstream_states, strict.chosen_by) == ("all_success", {"a": "skipped"}, "")


def test_a_skipped_try_of_an_older_attempt_changes_nothing():
    definition = dag(task("a", retries=1, retry_delay=0.0))
    state = state_of(definition, created(), queued("a"), started("a"), failed("a"))
    [retry] = decide(state, now=7.0, policy=POLICY)
    evolve(state, retry)
    [again] = decide(state, now=8.0, policy=POLICY)
    assert again.try_number == 2
    for event in (again, started("a", try_number=2, at=9.0), try_skipped("a", try_number=1, at=9.5)):
        evolve(state, event)
    instance = state.runs[("etl", RUN)].tasks["a"]
    assert (instance.state, instance.try_number) == ("running", 2)


def test_a_skipped_try_drives_a_run_to_success():
    definition = dag(task("a"), task("b", "a"), task("c", "b", rule="none_failed_min_one_success"))
    drive = Drive(definition, outcomes={"a": "skipped"}).to_the_end()
    assert drive.states() == {"a": "skipped", "b": "skipped", "c": "skipped"}
    assert drive.finished() == "success"
