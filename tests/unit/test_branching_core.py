"""Branches and short circuits in the scheduler core: given a choosing task's success with what it
followed, then the tasks it did not choose are skipped naming it (``chosen_by``), and what lies
further downstream is judged by its own trigger rule, as in Airflow 3.

Airflow's rules, in words: a branch skips every *direct* downstream task it did not follow, whatever
that task's trigger rule (a task group id stands for the group's roots; a task downstream of a
followed task is followed too); the skip then travels on through the trigger rules (all_success
skips, none_failed_min_one_success joins). A falsy short circuit skips every task downstream of it
when ``ignore_downstream_trigger_rules`` (the default), only its direct downstream tasks otherwise;
either way it never skips a teardown. A truthy one (or a branch that failed) chooses nothing.
"""

from __future__ import annotations

import pytest

from schemas import DagParsed, TaskDefinition, TaskSkipped, TaskUpstreamFailed
from services.scheduler.core import decide
from tests.unit.control_flow_fixtures import Drive, dag, ended, of_task, succeeded, task
from tests.unit.scheduler_fixtures import POLICY, created, names, queued, started, state_of
from tock import DAG, BranchPythonOperator, EmptyOperator, TaskGroup
from tock.branching import followed


def _branch(task_id: str = "branch", *upstream: str) -> TaskDefinition:
    return task(task_id, *upstream, kind="python", chooses="branch")


def _short(task_id: str = "short", *upstream: str, ignore: bool = True) -> TaskDefinition:
    return task(task_id, *upstream, kind="python", chooses="short_circuit", ignore_downstream_trigger_rules=ignore)


TWO_PATHS = dag(_branch(), task("a", "branch"), task("b", "branch"), task("b2", "b"), task("a2", "a"),
                task("join", "a2", "b2", rule="none_failed_min_one_success"))


# -- branches --------------------------------------------------------------------------------------

def test_a_branch_choosing_one_of_two_paths_queues_it_and_skips_the_other_naming_itself():
    given = [TWO_PATHS, created(), queued("branch"), started("branch"), succeeded("branch", ["a"])]
    decided = decide(state_of(*given), now=7.0, policy=POLICY)
    assert names(decided) == ["TaskQueued:a", "TaskSkipped:b", "TaskSkipped:b2"]
    skip_b, skip_b2 = decided[1], decided[2]
    assert skip_b.chosen_by == "branch" and skip_b.trigger_rule == ""
    assert skip_b.reason == "branch branch followed a" and skip_b.upstream_states == {"branch": "success"}
    # b2 is skipped by its own rule reading b's skip, not by the branch
    assert (skip_b2.chosen_by, skip_b2.trigger_rule, skip_b2.upstream_states) == ("", "all_success", {"b": "skipped"})


def test_the_join_after_a_branch_runs_with_none_failed_min_one_success_and_the_run_succeeds():
    drive = Drive(TWO_PATHS, follows={"branch": ["a"]}).to_the_end()
    assert drive.states() == {"branch": "success", "a": "success", "a2": "success", "b": "skipped",
                              "b2": "skipped", "join": "success"}
    assert drive.finished() == "success"


def test_a_join_left_at_all_success_is_skipped_by_the_path_not_taken():
    definition = dag(_branch(), task("a", "branch"), task("b", "branch"), task("join", "a", "b"))
    drive = Drive(definition, follows={"branch": ["b"]}).to_the_end()
    assert drive.states() == {"branch": "success", "a": "skipped", "b": "success", "join": "skipped"}
    # decided at once, while b was still queued: a skip upstream is enough for all_success
    assert drive.decided(TaskSkipped)["join"].upstream_states == {"a": "skipped", "b": "queued"}
    assert drive.finished() == "success"


@pytest.mark.parametrize("rule", ["all_done", "always", "one_failed", "none_skipped", "all_skipped"])
def test_a_branch_skips_a_direct_downstream_it_did_not_follow_whatever_its_rule(rule):
    definition = dag(_branch(), task("a", "branch"), task("other", "branch", rule=rule))
    given = [definition, created(), queued("branch"), started("branch"), succeeded("branch", ["a"])]
    [skip] = of_task(decide(state_of(*given), now=7.0, policy=POLICY), "other")
    assert isinstance(skip, TaskSkipped) and skip.chosen_by == "branch"


def test_a_branch_choosing_nothing_skips_every_direct_downstream_and_the_run_succeeds():
    definition = dag(_branch(), task("a", "branch"), task("b", "branch"), task("c", "a", "b", rule="all_done"))
    drive = Drive(definition, follows={"branch": []}).to_the_end()
    skips = drive.decided(TaskSkipped)
    assert {task_id: event.chosen_by for task_id, event in skips.items()} == {"a": "branch", "b": "branch"}
    assert skips["a"].reason == "branch branch followed none of its downstream tasks"
    # c is not directly downstream of the branch: its all_done counts the two skips as done, and runs
    assert drive.states()["c"] == "success"
    assert drive.finished() == "success"


def test_a_branch_that_failed_chooses_nothing_its_downstream_gives_up_by_rule():
    definition = dag(_branch(), task("a", "branch"), task("b", "branch", rule="all_done"))
    drive = Drive(definition, outcomes={"branch": "failed"}).to_the_end()
    assert drive.states() == {"branch": "failed", "a": "upstream_failed", "b": "success"}
    assert drive.decided(TaskUpstreamFailed)["a"].trigger_rule == "all_success"
    assert drive.finished() == "failed"


def test_nested_branches_each_skip_what_they_did_not_choose():
    definition = dag(_branch("outer"), _branch("inner", "outer"), task("c", "outer"),
                     task("d", "inner"), task("e", "inner"),
                     task("end", "c", "d", "e", rule="none_failed_min_one_success"))
    drive = Drive(definition, follows={"outer": ["inner"], "inner": ["e"]}).to_the_end()
    assert drive.states() == {"outer": "success", "c": "skipped", "inner": "success", "d": "skipped",
                              "e": "success", "end": "success"}
    chosen = {task_id: event.chosen_by for task_id, event in drive.decided(TaskSkipped).items()}
    assert chosen == {"c": "outer", "d": "inner"}


def test_an_inner_branch_skipped_by_the_outer_one_chooses_nothing_its_tasks_skip_by_rule():
    definition = dag(_branch("outer"), _branch("inner", "outer"), task("c", "outer"),
                     task("d", "inner"), task("e", "inner"),
                     task("end", "c", "d", "e", rule="none_failed_min_one_success"))
    drive = Drive(definition, follows={"outer": ["c"]}).to_the_end()
    assert drive.states() == {"outer": "success", "c": "success", "inner": "skipped", "d": "skipped",
                              "e": "skipped", "end": "success"}
    skips = drive.decided(TaskSkipped)
    assert skips["inner"].chosen_by == "outer"
    assert (skips["d"].chosen_by, skips["d"].trigger_rule) == ("", "all_success")


def test_a_task_with_two_branches_upstream_is_skipped_when_either_did_not_choose_it():
    definition = dag(_branch("one"), _branch("two"), task("both", "one", "two", rule="all_done"),
                     task("x", "one"), task("y", "two"))
    drive = Drive(definition, follows={"one": ["both", "x"], "two": ["y"]}).to_the_end()
    assert drive.states()["both"] == "skipped"
    assert drive.decided(TaskSkipped)["both"].chosen_by == "two"


def test_a_branch_still_running_decides_nothing_downstream():
    given = [TWO_PATHS, created(), queued("branch"), started("branch")]
    assert decide(state_of(*given), now=7.0, policy=POLICY) == []


# -- a branch written with the SDK: group ids and the join rule -------------------------------------

def _parsed(sdk_dag: DAG) -> DagParsed:
    definition = sdk_dag.to_definition("/dags/etl.py")
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0)


def _grouped_dag() -> tuple[DAG, object]:
    with DAG("etl") as sdk_dag:
        branch = BranchPythonOperator(task_id="branch", python_callable=lambda: None)
        with TaskGroup("load") as load:
            EmptyOperator(task_id="first") >> EmptyOperator(task_id="after")
            EmptyOperator(task_id="second")
        other = EmptyOperator(task_id="other")
        join = EmptyOperator(task_id="join", trigger_rule="none_failed_min_one_success")
        branch >> [load, other]
        [load, other] >> join
    return sdk_dag, branch


def test_choosing_a_task_group_follows_its_roots_and_skips_the_rest():
    sdk_dag, branch = _grouped_dag()
    follow = followed(branch, "load")
    assert follow == ["load.first", "load.second"]
    drive = Drive(_parsed(sdk_dag), follows={"branch": follow}).to_the_end()
    assert drive.states() == {"branch": "success", "load.first": "success", "load.after": "success",
                              "load.second": "success", "other": "skipped", "join": "success"}
    assert drive.decided(TaskSkipped)["other"].chosen_by == "branch"


def test_choosing_a_task_also_follows_the_join_directly_downstream_of_the_branch():
    with DAG("etl") as sdk_dag:
        branch = BranchPythonOperator(task_id="branch", python_callable=lambda: None)
        a, b = EmptyOperator(task_id="a"), EmptyOperator(task_id="b")
        join = EmptyOperator(task_id="join", trigger_rule="none_failed_min_one_success")
        branch >> [a, b, join]
        a >> join
    follow = followed(branch, "a")
    drive = Drive(_parsed(sdk_dag), follows={"branch": follow}).to_the_end()
    assert drive.states() == {"branch": "success", "a": "success", "b": "skipped", "join": "success"}


# -- short circuits --------------------------------------------------------------------------------

def test_a_falsy_short_circuit_skips_everything_downstream_whatever_the_rules():
    definition = dag(_short(), task("a", "short"), task("b", "a"), task("late", "b", rule="all_done"),
                     task("side"), task("mixed", "a", "side", rule="one_success"))
    drive = Drive(definition, follows={"short": []}).to_the_end()
    assert drive.states() == {"short": "success", "a": "skipped", "b": "skipped", "late": "skipped",
                              "side": "success", "mixed": "skipped"}
    chosen = {task_id: event.chosen_by for task_id, event in drive.decided(TaskSkipped).items()}
    assert chosen == {"a": "short", "b": "short", "late": "short", "mixed": "short"}
    assert drive.finished() == "success"


def test_a_falsy_short_circuit_respecting_rules_skips_only_its_direct_downstream():
    definition = dag(_short(ignore=False), task("a", "short"), task("b", "a"),
                     task("late", "a", rule="all_done"), task("after", "late"))
    drive = Drive(definition, follows={"short": []}).to_the_end()
    assert drive.states() == {"short": "success", "a": "skipped", "b": "skipped", "late": "success",
                              "after": "success"}
    skips = drive.decided(TaskSkipped)
    assert skips["a"].chosen_by == "short"
    assert (skips["b"].chosen_by, skips["b"].trigger_rule) == ("", "all_success")


@pytest.mark.parametrize("ignore", [True, False])
def test_a_truthy_short_circuit_lets_everything_run(ignore):
    definition = dag(_short(ignore=ignore), task("a", "short"), task("b", "a"))
    drive = Drive(definition).to_the_end()  # follow None: it chose nothing
    assert drive.states() == {"short": "success", "a": "success", "b": "success"}


def test_a_short_circuit_only_decides_once_it_succeeded():
    definition = dag(_short(), task("a", "short"))
    given = [definition, created(), *ended("short", "failed")]
    decided = decide(state_of(*given), now=7.0, policy=POLICY)
    assert names(decided) == ["TaskUpstreamFailed:a", "DagRunFinished"]


@pytest.mark.parametrize("ignore", [True, False])
def test_a_falsy_short_circuit_never_skips_a_teardown(ignore):
    """Airflow's short circuit leaves teardowns out of what it skips: the teardown of a setup that
    ran still runs (its rule, all_done_setup_success, sees the setup succeeded)."""
    definition = dag(task("make", is_setup=True), _short("short", "make", ignore=ignore), task("work", "short"),
                     task("drop", "make", "work", "short", rule="all_done_setup_success", is_teardown=True))
    drive = Drive(definition, follows={"short": []}).to_the_end()
    assert drive.states() == {"make": "success", "short": "success", "work": "skipped", "drop": "success"}
    assert drive.finished() == "success"
