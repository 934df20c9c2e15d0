"""A sensor's wait, decided by the owner of its run's partition (schemas/sensors.py).

A poke not met ends its try (TaskPoked): the instance is ``poked`` and the next walk decides, from the
log alone, when the next poke comes (TaskRescheduled: the instance waits up for retry, on the same
timer heap as retries, holding no slot and no process) or that the sensor has waited its timeout
(SensorTimedOut: failed and not retried, or skipped with ``soft_fail``). The wait's start and its
pokes so far are in the log (each TaskRescheduled says them), so a replay or a takeover decides the same.

Pokes are tries in the log (each has its try number, its claim and its log), but they use none of the
task's retries: only a failed try does.
"""

from __future__ import annotations

from typing import Any

from schemas import SensorDefinition, SensorTimedOut, TaskDefinition, TaskPoked, TaskRescheduled
from schemas.sensors import next_poke
from services.scheduler.core.instances import end_try, forget_try
from services.scheduler.core.model import (
    DEFERRED,
    FAILED,
    POKED,
    SKIPPED,
    UP_FOR_RETRY,
    DagRun,
    SchedulerState,
    TaskInstance,
    instance_key,
)

DEFAULT_SENSOR = SensorDefinition()  # for an instance whose task is no longer a sensor (or names no settings)


def decide_poked(run: DagRun, instance: TaskInstance, task: TaskDefinition,
                 now: float) -> TaskRescheduled | SensorTimedOut:
    """The next poke of a sensor whose poke was not met, or its timeout."""
    sensor = task.sensor or DEFAULT_SENSOR
    ended = instance.ended_at if instance.ended_at is not None else now
    since = instance.waiting_since if instance.waiting_since is not None else ended
    ids: dict[str, Any] = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": instance.task_id,
                           "map_index": instance.map_index,
                           "try_number": instance.try_number}
    poke = instance.wait_pokes + 1
    then = None if instance.poke_timed_out else next_poke(sensor, poke, ended, since, instance.not_before)
    if then is None:
        return SensorTimedOut(**ids, state=SKIPPED if sensor.soft_fail else FAILED, waited=ended - since,
                              timeout=sensor.timeout, at=now)
    return TaskRescheduled(**ids, next_try_number=instance.try_number + 1, not_before=then, waiting_since=since,
                           poke=poke, at=now)


def retries_used(instance: TaskInstance) -> int:
    """The tries of the instance that count against its retries: all but its pokes."""
    return instance.try_number - instance.pokes


# -- folds -------------------------------------------------------------------------------------

def poked(state: SchedulerState, run: DagRun, instance: TaskInstance, event: TaskPoked) -> None:
    """The current try's poke was not met (its claimant said so): it ends, the wait goes on."""
    if instance.waiting_since is None:  # the wait's first poke: its timeout counts from its start
        instance.waiting_since = instance.started_at if instance.started_at is not None else event.at
    end_try(state, run, instance, POKED, event.at)
    if instance.state == POKED:  # (a kill or a mark asked for while it poked comes first)
        instance.not_before, instance.poke_timed_out = event.reschedule_at, event.timed_out


def rescheduled(state: SchedulerState, event: TaskRescheduled) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    instance = _poked_instance(run, event.task_id, event.map_index, event.try_number)
    if run is None or instance is None:
        return
    instance.state, instance.not_before = UP_FOR_RETRY, event.not_before
    instance.waiting_since, instance.wait_pokes, instance.pokes = event.waiting_since, event.poke, instance.pokes + 1
    key = (run.dag_id, run.run_id, instance.key)
    state.waiting[key] = None
    state.timers.retry(key, instance.try_number, event.not_before)


def timed_out(state: SchedulerState, event: SensorTimedOut) -> None:
    """A poked sensor's, or a deferred one's (core/external.py), wait ended: not retried."""
    run = state.runs.get((event.dag_id, event.run_id))
    instance = _poked_instance(run, event.task_id, event.map_index, event.try_number, (POKED, DEFERRED))
    if run is not None and instance is not None:
        forget_try(state, (run.dag_id, run.run_id, instance.key))
        instance.state, instance.retryable, instance.ended_at = event.state, False, event.at
        instance.not_before, instance.waiting_since, instance.wait_pokes = None, None, 0


def carried(previous: TaskInstance, queued: TaskInstance) -> None:
    """A new try of the instance keeps its sensor's wait (a retry's new wait was reset by its decision)."""
    queued.pokes, queued.wait_pokes, queued.waiting_since = previous.pokes, previous.wait_pokes, previous.waiting_since


def wait_reset(instance: TaskInstance) -> None:
    """A failed try's retry waits anew: its timeout counts from its own first poke (Airflow's rule)."""
    instance.wait_pokes, instance.waiting_since = 0, None


def _poked_instance(run: DagRun | None, task_id: str, map_index: int, try_number: int,
                    states: tuple[str, ...] = (POKED,)) -> TaskInstance | None:
    instance = run.tasks.get(instance_key(task_id, map_index)) if run is not None else None
    if instance is None or instance.state not in states or instance.try_number != try_number:
        return None
    return instance
