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
    ClearTask,
    ExternalTaskReported,
    ExternalWaitAccepted,
    ExternalWaitRequested,
    TaskCleared,
    TaskDeferred,
    TaskQueued,
    TaskSucceeded,
    TimeSensorMet,
    TriggerDagRun,
)
from schemas.runs import manual_run_id
from tests.scenarios.scheduler_support import kill_hard, shared_event_log, start_with_dags, trigger

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


def test_a_deferred_sensor_survives_its_scheduler_killed_and_succeeds_once_with_no_try(make_settings, system,
                                                                                        tmp_path):
    awaited = _awaited(make_settings().partitions)
    gate = tmp_path / "gate"
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                                DAGS.format(awaited=awaited, gate=gate))
    first = processes.scheduler("first")
    logical_date = float(int(time.time()) - 3600)
    waiter_run = trigger(settings, "waiter", logical_date)
    awaited_run = trigger(settings, awaited, logical_date)
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


KICKER = '''
from tock import DAG, BashTask, TriggerDagRunOperator

with DAG({target!r}) as target:
    BashTask("slow", 'until [ -e {gate} ]; do sleep 0.2; done; exit {exit_code}')

with DAG("kicker") as kicker:
    TriggerDagRunOperator(task_id="kick", trigger_dag_id={target!r}, wait_for_completion=True,
                          deferrable=True) >> BashTask("after", "true")
'''


@pytest.mark.parametrize("exit_code", [0, 1], ids=["target succeeds", "target fails"])
def test_a_trigger_waiting_for_completion_ends_as_the_run_it_triggered_through_a_scheduler_kill(
        make_settings, system, tmp_path, exit_code):
    target = _awaited(make_settings().partitions).replace("awaited", "target")
    gate = tmp_path / "gate"
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                                KICKER.format(target=target, gate=gate, exit_code=exit_code))
    first = processes.scheduler("first")
    kicker_run = trigger(settings, "kicker", float(int(time.time())))
    tail.wait_for(lambda _events: tail.of_type(TaskDeferred, dag_id="kicker")
                  and tail.of_type(TaskQueued, dag_id=target, task_id="slow"), 120,
                  "the trigger deferred and the triggered run's task queued")
    kill_hard(first.pid)
    processes.scheduler("second")
    gate.touch()
    finished = tail.run_finished(kicker_run, 120)
    [report] = tail.of_type(ExternalTaskReported, dag_id="kicker")
    [deferred] = tail.of_type(TaskDeferred, dag_id="kicker")
    assert deferred.try_number == 1 and deferred.external_dag_id == target
    assert report.external_run_id == tail.of_type(TaskQueued, dag_id=target)[0].run_id
    if exit_code == 0:
        assert (finished.state, report.outcome) == ("success", "success")
        assert tail.of_type(TaskSucceeded, dag_id="kicker", task_id="after")
    else:
        assert (finished.state, report.outcome) == ("failed", "failed")
        assert tail.of_type(TaskSucceeded, dag_id="kicker", task_id="after") == []
    assert len(tail.of_type(TaskQueued, dag_id="kicker", task_id="kick")) == 1  # one try, waiting with none


TIMED = '''
from datetime import timedelta
from tock import DAG, BashTask, TimeDeltaSensor

with DAG("timed") as timed:
    TimeDeltaSensor(task_id="wait", delta=timedelta(seconds={delta})) >> BashTask("after", "true")
'''
# Past the scheduler's start-up and first decision however loaded the machine is (a moment already past when
# the sensor may run succeeds at once, with no deferral: CI at load 40 once took longer than 8 s to get there).
TIMED_DELTA = 30


def test_a_time_sensor_is_a_timer_with_no_try_that_survives_its_scheduler_killed(make_settings, system, tmp_path):
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, TIMED.format(delta=TIMED_DELTA))
    first = processes.scheduler("first")
    logical_date = float(int(time.time()))
    run_id = trigger(settings, "timed", logical_date)
    [deferred] = tail.wait_for(lambda _events: tail.of_type(TaskDeferred, dag_id="timed"), 60, "the deferral")
    assert deferred.until == logical_date + TIMED_DELTA
    kill_hard(first.pid)
    processes.scheduler("second")
    assert tail.run_finished(run_id, 120).state == "success"
    [met] = tail.of_type(TimeSensorMet, dag_id="timed")
    assert met.at >= logical_date + TIMED_DELTA and met.try_number == 1
    assert tail.of_type(TaskQueued, dag_id="timed", task_id="wait") == []  # no try, no poke


MARKED = '''
from tock import DAG, BashTask, ExternalTaskMarker, ExternalTaskSensor

with DAG("parent") as parent:
    BashTask("load", "true") >> ExternalTaskMarker(task_id="mark", external_dag_id={child!r},
                                                   external_task_id="wait")

with DAG({child!r}) as child:
    ExternalTaskSensor(task_id="wait", external_dag_id="parent", external_task_id="load") >> BashTask("use", "true")
'''


def test_a_recursive_clear_of_a_marker_clears_the_child_dags_task_and_what_follows_it(make_settings, system,
                                                                                      tmp_path):
    child = _awaited(make_settings().partitions).replace("awaited", "child")
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, MARKED.format(child=child))
    processes.scheduler("s1")
    logical_date = float(int(time.time()) - 60)
    parent_run, child_run = trigger(settings, "parent", logical_date), trigger(settings, child, logical_date)
    assert tail.run_finished(parent_run, 120).state == "success"
    assert tail.run_finished(child_run, 120).state == "success"
    event_log = shared_event_log(settings)
    event_log.append(ClearTask(dag_id="parent", run_id=parent_run, task_id="mark", request_id=uuid.uuid4().hex,
                               recursive=True, requested_by="test", at=time.time()))
    event_log.flush()
    tail.wait_for(lambda _events: len(tail.of_type(TaskSucceeded, dag_id=child, task_id="use")) >= 2, 120,
                  "the child's task after the sensor to run again")
    cleared = {event.task_id for event in tail.of_type(TaskCleared, dag_id=child)}
    assert cleared == {"wait", "use"}  # the task the marker names, and what follows it
    assert len(tail.of_type(TaskDeferred, dag_id=child)) == 2  # the sensor waited again (and was answered)
    assert {event.task_id for event in tail.of_type(TaskCleared, dag_id="parent")} == {"mark"}
