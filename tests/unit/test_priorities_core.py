"""Priorities (issue 23): each task's from its priority_weight and weight_rule as Airflow adds them up,
and the order tries are queued under a DAG's limit and launched under an executor's parallelism:
given these events, when deciding, then these tries first."""

from __future__ import annotations

import pytest

from services.scheduler.core.priorities import HIGHEST, LOWEST, launch_order, priorities_of
from tests.unit.limits_fixtures import dag, queued, queued_now, run, state_of, succeeded

DIAMOND = {"extract": [], "left": ["extract"], "right": ["extract"], "load": ["left", "right"]}
WEIGHTS = {"extract": 1, "left": 2, "right": 3, "load": 4}


def weighted(rule: str, weights: dict[str, int] = WEIGHTS, edges: dict[str, list[str]] = DIAMOND) -> dict:
    return {task_id: {"priority_weight": weights[task_id], "weight_rule": rule} for task_id in edges}


def priorities(rule: str, weights: dict[str, int] = WEIGHTS) -> dict[str, int]:
    return state_of(dag(DIAMOND, task_options=weighted(rule, weights))).dags["etl"].priorities


@pytest.mark.parametrize("rule, expected", [
    # downstream: own + every task below it, each once (load counts once for extract, through both sides)
    ("downstream", {"extract": 1 + 2 + 3 + 4, "left": 2 + 4, "right": 3 + 4, "load": 4}),
    ("upstream", {"extract": 1, "left": 2 + 1, "right": 3 + 1, "load": 4 + 2 + 3 + 1}),
    ("absolute", WEIGHTS),
])
def test_each_weight_rule_adds_up_the_weights_as_airflow_does(rule, expected):
    assert priorities(rule) == expected


def test_the_default_is_weight_one_added_downstream():
    assert state_of(dag(DIAMOND)).dags["etl"].priorities == {"extract": 4, "left": 2, "right": 2, "load": 1}


def test_rules_mix_within_a_dag_each_task_by_its_own():
    options = weighted("downstream")
    options["load"] = {"priority_weight": 4, "weight_rule": "upstream"}
    options["left"] = {"priority_weight": 2, "weight_rule": "absolute"}
    found = state_of(dag(DIAMOND, task_options=options)).dags["etl"].priorities
    assert found == {"extract": 10, "left": 2, "right": 7, "load": 10}


def test_negative_weights_count_and_sums_stay_in_airflows_bounds():
    assert priorities("downstream", {"extract": 5, "left": -3, "right": 0, "load": -1})["extract"] == 1
    huge = {task_id: HIGHEST for task_id in DIAMOND}
    assert priorities("downstream", huge)["extract"] == HIGHEST
    assert priorities("upstream", {task_id: LOWEST for task_id in DIAMOND})["load"] == LOWEST


def test_a_new_definition_computes_the_priorities_again():
    state = state_of(dag(DIAMOND, task_options=weighted("absolute")),
                     dag(DIAMOND, task_options=weighted("upstream"), fingerprint="fp-2"))
    assert state.dags["etl"].priorities == priorities("upstream")


def test_a_long_chain_is_computed_without_recursion():
    edges = {f"t{number:04d}": ([f"t{number - 1:04d}"] if number else []) for number in range(3000)}
    found = state_of(dag(edges)).dags["etl"].priorities
    assert found["t0000"] == 3000 and found["t2999"] == 1
    assert priorities_of({}, ()) == {}


# -- queued in priority order under max_active_tasks ----------------------------------------------

FOUR = {"a": [], "b": [], "c": [], "d": []}


def test_the_highest_priorities_are_queued_when_the_dag_has_room_for_fewer():
    options = {"a": {"priority_weight": 1}, "b": {"priority_weight": 5}, "c": {"priority_weight": 3},
               "d": {"priority_weight": 5}}
    state = state_of(dag(FOUR, task_options=options, max_active_tasks=2), run("r1", 100.0))
    assert queued_now(state) == [("r1", "b"), ("r1", "d")]  # equal priorities: by task id


def test_equal_priorities_go_by_the_older_run_first():
    state = state_of(dag({"a": []}, max_active_tasks=1), run("r-new", 200.0), run("r-old", 100.0))
    assert queued_now(state) == [("r-old", "a")]


def test_priority_goes_before_the_runs_age():
    options = {"hi": {"priority_weight": 10}, "lo": {"priority_weight": 1}}
    state = state_of(dag({"hi": [], "lo": []}, task_options=options, max_active_tasks=1),
                     run("r-old", 100.0), run("r-new", 200.0),
                     queued("r-old", "hi"), succeeded("r-old", "hi", at=5.0))
    assert queued_now(state) == [("r-new", "hi")]


def test_a_task_with_more_downstream_goes_first_by_default():
    edges = {"narrow": [], "wide": [], "x": ["wide"], "y": ["wide"]}
    state = state_of(dag(edges, max_active_tasks=1), run("r1", 100.0))
    assert queued_now(state) == [("r1", "wide")]


# -- launched in priority order under an executor's parallelism -------------------------------------

def test_more_queued_than_free_slots_launch_highest_priority_first_across_partitions():
    options = {"a": {"priority_weight": 1}, "b": {"priority_weight": 9}, "c": {"priority_weight": 5}}
    first = state_of(dag({"a": [], "b": []}, task_options=options), run("r1", 100.0),
                     queued("r1", "a"), queued("r1", "b"))
    second = state_of(dag({"c": []}, task_options=options, dag_id="other"), run("r2", 50.0, dag_id="other"),
                      queued("r2", "c", dag_id="other"))
    order = launch_order({0: first, 1: second}, free=1)
    assert order == [(0, ("etl", "r1", "b")), (1, ("other", "r2", "c")), (0, ("etl", "r1", "a"))]


def test_with_a_slot_for_every_queued_try_they_launch_in_the_order_queued():
    options = {"a": {"priority_weight": 1}, "b": {"priority_weight": 9}}
    state = state_of(dag({"a": [], "b": []}, task_options=options), run("r1", 100.0),
                     queued("r1", "a"), queued("r1", "b"))
    assert launch_order({0: state}, free=2) == [(0, ("etl", "r1", "a")), (0, ("etl", "r1", "b"))]
