"""TriggerDagRunOperator through the real system (issue 24): a task of one DAG starts a run of another, on
another partition, with its rendered conf; the task cleared and run again (a second try, as a retry or a
re-run is) starts no second run, the target's owner applying the request id once; with reset_dag_run the
second try clears the run instead."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from infra.log import partition_for
from schemas import ClearTask, DagRunCreated, TaskCleared, TaskSucceeded
from tests.scenarios.scheduler_support import shared_event_log, start_with_dags, trigger

pytestmark = pytest.mark.scenario

DAGS = '''
from tock import DAG, TriggerDagRunOperator, task

with DAG("kicker") as kicker:
    TriggerDagRunOperator(task_id="kick", trigger_dag_id={target!r}, conf={{"asked_by": "{{{{ dag.dag_id }}}}"}})
    TriggerDagRunOperator(task_id="kick_reset", trigger_dag_id={target!r}, trigger_run_id="reset-me",
                          reset_dag_run=True)

with DAG({target!r}) as target:
    @task
    def show(params=None, dag_run=None):
        return dag_run.conf

    show()
'''


def _target(partitions: int) -> str:
    kicker = partition_for("kicker", partitions)
    return next(f"kicked_{number}" for number in range(10_000)
                if partitions < 2 or partition_for(f"kicked_{number}", partitions) != kicker)


def _clear(settings, run_id: str, task_id: str) -> None:
    event_log = shared_event_log(settings)
    event_log.append(ClearTask(dag_id="kicker", run_id=run_id, task_id=task_id, request_id=uuid.uuid4().hex,
                               requested_by="test", at=time.time()))
    event_log.flush()


def test_a_triggered_run_is_started_once_whatever_tries_and_reset_clears_it(make_settings, system, tmp_path):
    target = _target(make_settings().partitions)
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, DAGS.format(target=target))
    processes.scheduler("s1")
    run_id = trigger(settings, "kicker")
    assert tail.run_finished(run_id, 120).state == "success"
    tail.wait_for(lambda _events: len(tail.of_type(TaskSucceeded, dag_id=target)) >= 2, 120, "both triggered runs")
    runs = {event.run_id: event for event in tail.of_type(DagRunCreated, dag_id=target)}
    assert set(runs) == {f"manual__{kick}" for kick in _pushed(tail, run_id)}
    shown = {event.run_id: json.loads(event.values_json)["return_value"]
             for event in tail.of_type(TaskSucceeded, dag_id=target)}
    assert {"asked_by": "kicker"} in shown.values()

    _clear(settings, run_id, "")  # every task of the kicker's run again: second tries of both
    tail.wait_for(lambda _events: len(tail.of_type(TaskSucceeded, dag_id="kicker", try_number=2)) >= 2, 120,
                  "the second tries")
    tail.wait_for(lambda _events: tail.of_type(TaskCleared, dag_id=target), 60, "the reset's clear")
    assert tail.run_finished(run_id, 120).state == "success"
    assert len(tail.of_type(DagRunCreated, dag_id=target)) == 2  # no second run of either
    assert {event.run_id for event in tail.of_type(TaskCleared, dag_id=target)} == {"manual__reset-me"}


def _pushed(tail, run_id: str) -> list[str]:
    return [json.loads(event.values_json)["trigger_run_id"].removeprefix("manual__")
            for event in tail.of_type(TaskSucceeded, dag_id="kicker", run_id=run_id)]
