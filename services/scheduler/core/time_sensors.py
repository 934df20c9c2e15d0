"""Time sensors with no poke (schemas/external.py ``TimeSensorMet``): ``TimeDeltaSensor`` and a
``DateTimeSensor`` with a fixed moment are timers of the owner of the run's partition.

When the sensor may run, the owner computes its moment (the target, or the run's data interval end plus
the delta): already passed, the sensor succeeds at once (``TimeSensorMet``); else it is ``deferred``
(``TaskDeferred``, no try, no slot, no process) until the moment, or until its timeout if that comes
first, on the same timer heap as retries. At that time it succeeds, or times out (``SensorTimedOut``).
"""

from __future__ import annotations

from typing import Any

from schemas import SensorTimedOut, TaskDeferred, TaskDefinition, TimeSensorMet
from services.scheduler.core.instances import end_try
from services.scheduler.core.model import (
    DEFERRED,
    FAILED,
    NONE,
    SKIPPED,
    SUCCESS,
    UP_FOR_RETRY,
    DagRun,
    SchedulerState,
    TaskInstance,
)
from services.scheduler.core.sensors import DEFAULT_SENSOR


def moment_of(task: TaskDefinition, interval_end: float) -> float:
    """The moment the time sensor waits for, given its run's data interval end."""
    wait = task.time_wait
    assert wait is not None  # a time sensor has its moment
    if wait.target is not None:
        return wait.target
    return interval_end + (wait.delta or 0.0)


def decide_start(run: DagRun, instance: TaskInstance, task: TaskDefinition, moment: float, scheduler_id: str,
                 now: float) -> tuple[TimeSensorMet | TaskDeferred, str]:
    """The sensor may run: met already, or deferred until its moment (or its timeout, if sooner)."""
    ids = _ids(run, instance, instance.try_number + 1)
    if now >= moment:
        return TimeSensorMet(**ids, moment=moment, at=now), SUCCESS
    until = min(moment, now + (task.sensor or DEFAULT_SENSOR).timeout)
    return TaskDeferred(**ids, wait_id="", external_dag_id="", until=until, scheduler_id=scheduler_id, at=now), DEFERRED


def decide_due(run: DagRun, instance: TaskInstance, task: TaskDefinition, moment: float,
               now: float) -> tuple[TimeSensorMet | SensorTimedOut, str] | None:
    """A deferred time sensor whose timer has come: met, or timed out (its timeout came first)."""
    if instance.not_before is None or now < instance.not_before:
        return None
    ids = _ids(run, instance, instance.try_number)
    if now >= moment:
        return TimeSensorMet(**ids, moment=moment, at=now), SUCCESS
    sensor = task.sensor or DEFAULT_SENSOR
    since = instance.waiting_since if instance.waiting_since is not None else now
    state = SKIPPED if sensor.soft_fail else FAILED
    return SensorTimedOut(**ids, state=state, waited=now - since, timeout=sensor.timeout, at=now), state


def _ids(run: DagRun, instance: TaskInstance, try_number: int) -> dict[str, Any]:
    return {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": instance.task_id, "map_index": instance.map_index,
            "try_number": try_number}


def met(state: SchedulerState, event: TimeSensorMet) -> None:
    """The moment came: the deferred instance succeeds, or (its moment already past) the waiting one."""
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    instance = run.instance(event.task_id, event.map_index)
    if instance.state == DEFERRED and instance.try_number == event.try_number:
        instance.not_before = None
        end_try(state, run, instance, SUCCESS, event.at)
    elif instance.state in (NONE, UP_FOR_RETRY) and event.try_number > instance.try_number:
        instance.state, instance.try_number, instance.ended_at = SUCCESS, event.try_number, event.at
