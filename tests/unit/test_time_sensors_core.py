"""Time sensors with no poke (issue 24): given a TimeDeltaSensor's or a fixed DateTimeSensor's run, the
owner defers it until its moment (or its timeout, if sooner) on its own timer, and then it succeeds (or
times out); a moment already past succeeds at once. No try is ever queued."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    SensorDefinition,
    SensorTimedOut,
    TaskDeferred,
    TaskDefinition,
    TaskQueued,
    TimeSensorMet,
    TimeWaitDefinition,
)
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import POLICY
from tock import DAG, DateTimeSensor, TimeDeltaSensor

LOGICAL = 1_000_000.0


def timed(wait: TimeWaitDefinition, timeout: float = 7 * 86_400.0, soft_fail: bool = False) -> SchedulerState:
    tasks = [TaskDefinition(task_id="wait", kind="time_sensor", time_wait=wait,
                            sensor=SensorDefinition(timeout=timeout, soft_fail=soft_fail)),
             TaskDefinition(task_id="after", kind="bash", command="true", upstream=["wait"])]
    definition = DagDefinition(dag_id="timed", file_path="/dags/timed.py", tasks=tasks)
    return fold(SchedulerState(), [
        DagParsed(dag_id="timed", file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0),
        DagRunCreated(dag_id="timed", run_id="manual__r", logical_date=LOGICAL, run_type="manual",
                      dag_fingerprint="fp", scheduler_id="sched-a", at=LOGICAL)])


def turn(state: SchedulerState, now: float) -> list:
    decided = decide(state, now, POLICY, touched=[])  # only the timers walk the run
    fold(state, decided)
    return decided


def of(kind: type, events: list) -> list:
    return [event for event in events if isinstance(event, kind)]


def test_a_delta_defers_the_sensor_until_the_data_interval_end_plus_the_delta_then_it_succeeds():
    state = timed(TimeWaitDefinition(delta=600.0))
    [deferred] = of(TaskDeferred, decide(state, LOGICAL + 1, POLICY))
    fold(state, [deferred])
    assert (deferred.until, deferred.try_number, deferred.external_dag_id) == (LOGICAL + 600, 1, "")
    assert turn(state, LOGICAL + 599) == []
    decided = turn(state, LOGICAL + 600)
    [met] = of(TimeSensorMet, decided)
    assert (met.try_number, met.moment) == (1, LOGICAL + 600)
    assert [event.task_id for event in of(TaskQueued, decided)] == ["after"]  # in the same walk; never "wait"


def test_a_moment_already_past_succeeds_at_once():
    state = timed(TimeWaitDefinition(target=LOGICAL - 5))
    decided = decide(state, LOGICAL + 1, POLICY)
    assert [type(event).__name__ for event in decided if event.task_id == "wait"] == ["TimeSensorMet"]


def test_a_timeout_before_the_moment_ends_it_then_as_soft_fail_says():
    state = timed(TimeWaitDefinition(target=LOGICAL + 3600), timeout=60.0, soft_fail=True)
    [deferred] = of(TaskDeferred, decide(state, LOGICAL, POLICY))
    fold(state, [deferred])
    assert deferred.until == LOGICAL + 60
    [timed_out] = of(SensorTimedOut, turn(state, LOGICAL + 60))
    assert (timed_out.state, timed_out.timeout) == ("skipped", 60.0)


def test_a_snapshot_of_a_deferred_time_sensor_decides_the_same():
    state = timed(TimeWaitDefinition(delta=600.0))
    fold(state, of(TaskDeferred, decide(state, LOGICAL, POLICY)))
    restored = decode_snapshot(encode_snapshot(Snapshot(0, state, {}))).state
    assert of(TimeSensorMet, decide(restored, LOGICAL + 600, POLICY, touched=[])) == of(
        TimeSensorMet, decide(state, LOGICAL + 600, POLICY, touched=[]))
    assert of(TimeSensorMet, decide(restored, LOGICAL + 600, POLICY, touched=[]))


def test_the_sdk_makes_known_moments_timers_and_templated_ones_pokes():
    with DAG("timed", schedule=None) as dag:
        TimeDeltaSensor(task_id="delta", delta=timedelta(minutes=10))
        DateTimeSensor(task_id="fixed", target_time=datetime(2030, 1, 1, tzinfo=UTC))
        DateTimeSensor(task_id="naive", target_time="2030-01-01T00:00:00")
        DateTimeSensor(task_id="templated", target_time="{{ params.when }}")
    tasks = {task.task_id: task for task in dag.to_definition("/dags/timed.py").tasks}
    assert (tasks["delta"].kind, tasks["delta"].time_wait) == ("time_sensor", TimeWaitDefinition(delta=600.0))
    moment = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    assert tasks["fixed"].time_wait == tasks["naive"].time_wait == TimeWaitDefinition(target=moment)
    assert (tasks["templated"].kind, tasks["templated"].time_wait) == ("sensor", None)


def test_a_cleared_deferred_time_sensor_is_deferred_anew_and_cancels_nothing():
    from schemas import ClearTask, ExternalWaitCancelled

    state = timed(TimeWaitDefinition(delta=600.0))
    fold(state, of(TaskDeferred, decide(state, LOGICAL, POLICY)))
    fold(state, [ClearTask(dag_id="timed", run_id="manual__r", task_id="wait", request_id="c", at=LOGICAL + 5)])
    decided = decide(state, LOGICAL + 6, POLICY)
    assert of(ExternalWaitCancelled, decided) == []
    assert [event.try_number for event in of(TaskDeferred, decided)] == [2]
