"""ExternalTaskSensor through the real system (issue 24): a sensor waits on a task of a DAG on another
partition. It runs no try and holds no slot: it is deferred. Its scheduler is killed hard while it waits;
the next one takes both partitions over, and when the awaited task succeeds the sensor succeeds once and
what follows it runs, from the log alone."""

from __future__ import annotations

import time
import uuid

import pytest

from infra.log import partition_for
from schemas import (
    ExternalTaskReported,
    ExternalWaitAccepted,
    ExternalWaitRequested,
    TaskDeferred,
    TaskQueued,
    TaskSucceeded,
    TriggerDagRun,
)
from schemas.runs import manual_run_id
from tests.scenarios.scheduler_support import kill_hard, shared_event_log, start_with_dags

pytestmark = pytest.mark.scenario

DAGS = '''
from tock import DAG, BashTask, ExternalTaskSensor

with DAG({awaited!r}) as awaited:
    BashTask("slow", 'until [ -e {gate} ]; do sleep 0.2; done') >> BashTask("done", "true")

with DAG("waiter") as waiter:
    ExternalTaskSensor(task_id="wait", external_dag_id={awaited!r}, external_task_id="done",
                       failed_states=["failed"], timeout=600) >> BashTask("after", "true")
'''


def _awaited(partitions: int) -> str:
    """A DAG id on another partition than the waiter's: the wait crosses partitions."""
    waiter = partition_for("waiter", partitions)
    return next(f"awaited_{number}" for number in range(10_000)
                if partition_for(f"awaited_{number}", partitions) != waiter)


def _trigger_at(settings, dag_id: str, logical_date: float) -> str:
    request_id = uuid.uuid4().hex
    event_log = shared_event_log(settings)
    event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="test",
                                   logical_date=logical_date, at=time.time()))
    event_log.flush()
    return manual_run_id(request_id)


def test_a_deferred_sensor_survives_its_scheduler_killed_and_succeeds_once_with_no_try(make_settings, system,
                                                                                        tmp_path):
    awaited = _awaited(make_settings().partitions)
    gate = tmp_path / "gate"
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                                DAGS.format(awaited=awaited, gate=gate))
    first = processes.scheduler("first")
    logical_date = float(int(time.time()) - 3600)
    waiter_run = _trigger_at(settings, "waiter", logical_date)
    awaited_run = _trigger_at(settings, awaited, logical_date)
    tail.wait_for(lambda _events: tail.of_type(TaskDeferred, dag_id="waiter")
                  and tail.of_type(ExternalWaitAccepted, dag_id=awaited), 120, "the sensor to defer, its wait read")
    kill_hard(first.pid)
    processes.scheduler("second")
    tail.wait_for(lambda _events: tail.of_type(TaskQueued, dag_id=awaited, task_id="slow"), 60, "the awaited task")
    gate.touch()
    assert tail.run_finished(awaited_run, 120).state == "success"
    assert tail.run_finished(waiter_run, 120).state == "success"

    assert tail.of_type(TaskQueued, dag_id="waiter", task_id="wait") == []  # no try: never queued
    [deferred] = tail.of_type(TaskDeferred, dag_id="waiter")
    [request] = tail.of_type(ExternalWaitRequested, dag_id=awaited)
    [report] = tail.of_type(ExternalTaskReported, dag_id="waiter")
    assert deferred.wait_id == request.wait_id == report.wait_id
    assert (report.outcome, report.states, report.external_run_id) == ("success", {"done": "success"}, awaited_run)
    [after] = tail.of_type(TaskSucceeded, dag_id="waiter", task_id="after")
    assert after.at >= report.at
