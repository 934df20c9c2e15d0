"""The authoring side of priorities and limits: what the SDK puts in the definition for priority_weight,
weight_rule, the task and DAG limits, retry backoff and dagrun_timeout (given as task arguments, by
decorators and operators, or by a DAG's or a task group's default_args), and the errors that name the
DAG, the task and the argument."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tock import DAG, BashTask, DagDefinitionError, EmptyOperator, PythonOperator, TaskGroup, WeightRule, task


def _defs(dag: DAG) -> dict:
    return {item.task_id: item for item in dag.to_definition("f.py").tasks}


def _noop() -> None:
    return None


def test_the_defaults_are_airflows():
    with DAG("defaults") as dag:
        BashTask("t", "true")
    definition = dag.to_definition("f.py")
    [found] = definition.tasks
    assert (definition.max_active_tasks, definition.dagrun_timeout) == (16, None)
    assert (found.priority_weight, found.weight_rule, found.max_active_tis_per_dag,
            found.max_active_tis_per_dagrun, found.retry_exponential_backoff, found.max_retry_delay) == (
        1, "downstream", None, None, False, None)


def test_every_kind_of_task_takes_the_arguments():
    with DAG("kinds") as dag:
        BashTask("bash", "true", priority_weight=3, weight_rule="upstream", max_active_tis_per_dag=2)
        EmptyOperator(task_id="empty", priority_weight=4, weight_rule=WeightRule.ABSOLUTE)
        PythonOperator(task_id="op", python_callable=_noop, max_active_tis_per_dagrun=1,
                       retry_exponential_backoff=True, max_retry_delay=timedelta(minutes=10))

        @task(priority_weight=7, retries=3, retry_exponential_backoff=True, max_retry_delay=90)
        def fn() -> None: ...
        fn()
        fn.override(task_id="other", priority_weight=8)()
    found = _defs(dag)
    assert (found["bash"].priority_weight, found["bash"].weight_rule, found["bash"].max_active_tis_per_dag) == (
        3, "upstream", 2)
    assert (found["empty"].priority_weight, found["empty"].weight_rule) == (4, "absolute")
    assert (found["op"].max_active_tis_per_dagrun, found["op"].retry_exponential_backoff,
            found["op"].max_retry_delay) == (1, True, 600.0)
    assert (found["fn"].priority_weight, found["fn"].retry_exponential_backoff, found["fn"].max_retry_delay) == (
        7, True, 90.0)
    assert found["other"].priority_weight == 8


def test_the_dag_takes_its_limits_in_seconds_or_timedeltas():
    with DAG("limits", max_active_tasks=4, dagrun_timeout=timedelta(hours=1)) as dag:
        BashTask("t", "true")
    definition = dag.to_definition("f.py")
    assert (definition.max_active_tasks, definition.dagrun_timeout) == (4, 3600.0)
    assert DAG("in_seconds", dagrun_timeout=90).dagrun_timeout == 90.0


def test_default_args_fill_what_a_task_does_not_set_and_a_group_goes_over_the_dags():
    defaults = {"priority_weight": 5, "weight_rule": "absolute", "retries": 2, "retry_exponential_backoff": True}
    with DAG("defaults", default_args=defaults) as dag:
        BashTask("plain", "true")
        BashTask("own", "true", priority_weight=9)
        with TaskGroup("g", default_args={"priority_weight": 6}):
            BashTask("grouped", "true")
    found = _defs(dag)
    assert [(found[task_id].priority_weight, found[task_id].weight_rule, found[task_id].retries,
             found[task_id].retry_exponential_backoff) for task_id in ("plain", "own", "g.grouped")] == [
        (5, "absolute", 2, True), (9, "absolute", 2, True), (6, "absolute", 2, True)]


def test_weight_rule_is_airflows_enum():
    assert [rule.value for rule in WeightRule] == ["downstream", "upstream", "absolute"]
    assert WeightRule.is_valid("upstream") and not WeightRule.is_valid("sideways")
    assert str(WeightRule.DOWNSTREAM) == "downstream" and WeightRule.all_weight_rules() == {
        "downstream", "upstream", "absolute"}


def test_a_negative_weight_is_allowed_as_in_airflow():
    with DAG("negative") as dag:
        BashTask("t", "true", priority_weight=-5)
    assert _defs(dag)["t"].priority_weight == -5


@pytest.mark.parametrize("arguments, problem", [
    ({"priority_weight": "high"}, "priority_weight must be an integer, got 'high'"),
    ({"priority_weight": 1.5}, "priority_weight must be an integer, got 1.5"),
    ({"priority_weight": True}, "priority_weight must be an integer, got True"),
    ({"priority_weight": 2**31}, "priority_weight must be from -2147483648 to 2147483647"),
    ({"weight_rule": "sideways"}, "unknown weight_rule 'sideways' (valid: downstream, upstream, absolute"),
    ({"max_active_tis_per_dag": 0}, "max_active_tis_per_dag must be None or a positive integer, got 0"),
    ({"max_active_tis_per_dagrun": -1}, "max_active_tis_per_dagrun must be None or a positive integer, got -1"),
    ({"max_active_tis_per_dag": "2"}, "max_active_tis_per_dag must be None or a positive integer, got '2'"),
    ({"retry_exponential_backoff": "yes"}, "retry_exponential_backoff must be True or False, got 'yes'"),
    ({"max_retry_delay": -1}, "max_retry_delay must not be negative, got -1"),
    ({"max_retry_delay": "10m"}, "max_retry_delay must be seconds or a timedelta, not '10m'"),
    ({"max_retry_delay": float("inf")}, "max_retry_delay must be a finite number of seconds"),
])
def test_a_bad_task_argument_is_a_parse_error_naming_the_dag_the_task_and_the_argument(arguments, problem):
    with pytest.raises(DagDefinitionError) as raised, DAG("bad"):
        BashTask("t", "true", **arguments)
    assert "DAG 'bad'" in str(raised.value) and f"task 't': {problem}" in str(raised.value)


def test_a_bad_argument_of_a_decorated_task_names_it_too():
    with pytest.raises(DagDefinitionError, match="task 'fn': unknown weight_rule 'up'"), DAG("bad"):
        @task(weight_rule="up")
        def fn() -> None: ...
        fn()


@pytest.mark.parametrize("arguments, problem", [
    ({"max_active_tasks": 0}, "max_active_tasks must be a positive integer, got 0"),
    ({"max_active_tasks": 2.0}, "max_active_tasks must be a positive integer, got 2.0"),
    ({"max_active_tasks": True}, "max_active_tasks must be a positive integer, got True"),
    ({"dagrun_timeout": -5}, "dagrun_timeout must not be negative, got -5"),
    ({"dagrun_timeout": 0}, "dagrun_timeout must be positive (or None: no timeout), got 0"),
    ({"dagrun_timeout": "1h"}, "dagrun_timeout must be seconds or a timedelta, not '1h'"),
    ({"dagrun_timeout": timedelta(seconds=-1)}, "dagrun_timeout must not be negative, got -1.0"),
    ({"default_args": {"sla": 60}}, "default_args has 'sla', which is not a task option"),
    ({"default_args": {"priority_weight": "x"}}, "default_args: priority_weight must be an integer, got 'x'"),
    ({"default_args": ["retries"]}, "default_args must be a dict, got ['retries']"),
])
def test_a_bad_dag_argument_is_a_parse_error_naming_the_dag_and_the_argument(arguments, problem):
    with pytest.raises(DagDefinitionError) as raised:
        DAG("bad", **arguments)
    assert "DAG 'bad'" in str(raised.value) and problem in str(raised.value)
