"""ExternalTaskSensor in DAG files (issue 24): Airflow's arguments become the definition the scheduler
decides by; a mistake is a ValueError naming the sensor and what is wrong, as Airflow's checks say."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock import DAG, ExternalTaskSensor, State, TaskInstanceState

TASK_STATES = [state.value for state in TaskInstanceState]


def definition(**arguments):
    with DAG("report") as dag:
        ExternalTaskSensor(task_id="wait", external_dag_id="etl", **arguments)
    [task] = dag.to_definition("/dags/report.py").tasks
    return task


def test_a_task_wait_with_airflows_defaults():
    task = definition(external_task_id="load", execution_delta=timedelta(hours=1), timeout=600, soft_fail=True)
    assert task.kind == "external_sensor"
    wait = task.external
    assert (wait.external_dag_id, wait.task_ids, wait.allowed_states, wait.failed_states, wait.delta) == (
        "etl", ["load"], ["success"], [], 3600.0)
    assert (task.sensor.timeout, task.sensor.soft_fail) == (600.0, True)


def test_a_run_wait_takes_run_states_and_a_group_wait_its_group():
    assert definition(allowed_states=["failed"]).external.task_ids == []
    assert definition(external_task_group_id="load").external.task_group_id == "load"
    assert definition(external_task_ids=["a", "b"], allowed_states=[State.SUCCESS, State.SKIPPED],
                      failed_states=[TaskInstanceState.FAILED]).external.allowed_states == ["success", "skipped"]


@pytest.mark.parametrize(("arguments", "says"), [
    ({"external_task_id": "a", "external_task_ids": ["b"]}, "not both"),
    ({"external_task_group_id": "g", "external_task_id": "a"}, "not both"),
    ({"allowed_states": ["up_for_retry"]}, "allowed_states names 'up_for_retry'"),  # a run has no such state
    ({"external_task_id": "a", "failed_states": ["bogus"]}, "failed_states names 'bogus'"),
    ({"external_task_id": "a", "allowed_states": ["success"], "skipped_states": ["success"]}, "named twice"),
    ({"execution_date_fn": lambda date: date}, "use execution_delta"),
    ({"external_task_id": "{{ params.task }}"}, "is a template"),
    ({"execution_delta": 3600}, "execution_delta must be a timedelta"),
    ({"external_task_ids": "ab"}, "a list of task ids"),
    ({"check_existence": "yes"}, "check_existence must be True or False"),
])
def test_mistakes_are_refused_naming_them(arguments, says):
    with pytest.raises(ValueError, match="ExternalTaskSensor 'wait'") as raised:
        definition(**arguments)
    assert says in str(raised.value)


def test_it_cannot_be_mapped_yet():
    with pytest.raises(NotImplementedError, match="cannot be mapped"):
        ExternalTaskSensor.partial(task_id="wait", external_dag_id="etl")


@given(allowed=st.lists(st.sampled_from(TASK_STATES), max_size=4, unique=True),
       failed=st.lists(st.sampled_from(TASK_STATES), max_size=4, unique=True))
def test_any_disjoint_task_states_are_taken_and_overlapping_ones_refused(allowed, failed):
    arguments = {"external_task_id": "a", "allowed_states": allowed, "failed_states": failed}
    if set(allowed) & set(failed):
        with pytest.raises(ValueError, match="named twice"):
            definition(**arguments)
    else:
        wait = definition(**arguments).external
        assert (wait.allowed_states, wait.failed_states) == (allowed, failed)
