"""Waiting on another DAG: Airflow's ``ExternalTaskSensor`` as decisions of two owners (schemas/external.py).

- **The sensor's side.** An external task sensor that may run does not queue a try: its owner writes
  the wait on the awaited DAG's partition (``ExternalWaitRequested``) and marks the sensor ``deferred``
  (``TaskDeferred``), on the same timer heap as retries, at its timeout. The answer
  (``ExternalTaskReported``) ends it; the timeout, first, ends it instead (``SensorTimedOut``) and
  cancels the wait (``ExternalWaitCancelled``). An answer or a timeout of an older deferral is ignored:
  each deferral has its own try number and wait id.
- **The awaited side.** The owner of the awaited DAG's partition keeps its waits. It reads a wait when it
  arrives (``ExternalWaitAccepted`` if not met yet) and again when a run of its DAG changes, and answers
  once the awaited tasks or run of the awaited logical date are in a state the wait names
  (``ExternalTaskReported`` on the sensor's partition + ``ExternalWaitAnswered`` here).

Airflow's rules: a task id or run in one of ``failed_states`` fails the sensor, then one in
``skipped_states`` skips it, and all of them in ``allowed_states`` make it succeed; otherwise it waits
(with no failed states, a failure of what it awaits keeps it waiting until its timeout, as in Airflow).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TypeAlias

from schemas import (
    ExternalTaskReported,
    ExternalWaitAccepted,
    ExternalWaitAnswered,
    ExternalWaitCancelled,
    ExternalWaitDefinition,
    ExternalWaitRequested,
    SensorTimedOut,
    TaskDeferred,
    TaskDefinition,
    wait_id_of,
)
from services.scheduler.core.instances import end_try, forget_try
from services.scheduler.core.mapping import mapped_instances, whole_state
from services.scheduler.core.model import (
    DEFERRED,
    FAILED,
    NONE,
    SKIPPED,
    SUCCESS,
    UP_FOR_RETRY,
    DagEntry,
    DagRun,
    RunKey,
    SchedulerState,
    TaskInstance,
    instance_key,
    logical_date_iso,
)
from services.scheduler.core.sensors import DEFAULT_SENSOR

ExternalDecision: TypeAlias = (ExternalWaitRequested | TaskDeferred | ExternalTaskReported | ExternalWaitAnswered
                               | ExternalWaitAccepted | ExternalWaitCancelled)
Answer: TypeAlias = tuple[str, str, str, dict[str, str]]  # (outcome, reason, run id, awaited states)

_RUNNING = "running"  # an open run's state, as Airflow's DagRunState names it
_NO_TIMEOUT = 100 * 365 * 86_400.0  # a wait for a triggered run has no timeout of its own (Airflow's)


def waits_after_success(task: TaskDefinition | None) -> bool:
    """Whether the task's successful try is followed by a wait on the run it triggered (decided, not folded:
    the definition read when deciding)."""
    return task is not None and task.external is not None and task.external.after_success


def decide_wait_after_success(run: DagRun, instance: TaskInstance, task: TaskDefinition, scheduler_id: str,
                              now: float) -> list[ExternalDecision]:
    """A TriggerDagRunOperator's try succeeded: the wait for the run it triggered (named by what the try
    pushed), and the task deferred until that run ends (with the try's number: no new try)."""
    wait = task.external
    assert wait is not None  # waits_after_success
    pushed = _pushed(instance.values_json)
    dag_id, run_id = str(pushed.get("trigger_dag_id") or wait.external_dag_id), str(pushed.get("trigger_run_id", ""))
    wait_id = wait_id_of(run.dag_id, run.run_id, task.task_id, instance.map_index, instance.try_number)
    timeout = task.execution_timeout if task.execution_timeout is not None else _NO_TIMEOUT
    return [
        ExternalWaitRequested(dag_id=dag_id, wait_id=wait_id, logical_date=0.0, awaited_run_id=run_id, task_ids=[],
                              allowed_states=list(wait.allowed_states), skipped_states=list(wait.skipped_states),
                              failed_states=list(wait.failed_states), sensor_dag_id=run.dag_id,
                              sensor_run_id=run.run_id, sensor_task_id=task.task_id,
                              sensor_map_index=instance.map_index, sensor_try_number=instance.try_number, at=now),
        TaskDeferred(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id, map_index=instance.map_index,
                     try_number=instance.try_number, wait_id=wait_id, external_dag_id=dag_id, until=now + timeout,
                     scheduler_id=scheduler_id, at=now),
    ]


def _pushed(values_json: str) -> dict[str, object]:
    try:
        values = json.loads(values_json) if values_json else {}
    except ValueError:
        return {}
    return values if isinstance(values, dict) else {}


# -- the sensor's side -----------------------------------------------------------------------------

def decide_deferral(run: DagRun, instance: TaskInstance, task: TaskDefinition, scheduler_id: str,
                    now: float) -> list[ExternalDecision]:
    """The sensor may run: its wait, on the awaited DAG's partition, and its deferral here."""
    wait = task.external
    assert wait is not None  # an external sensor has what it waits on
    sensor = task.sensor or DEFAULT_SENSOR
    try_number = instance.try_number + 1
    wait_id = wait_id_of(run.dag_id, run.run_id, task.task_id, instance.map_index, try_number)
    return [
        ExternalWaitRequested(dag_id=wait.external_dag_id, wait_id=wait_id, logical_date=run.logical_date - wait.delta,
                              task_ids=list(wait.task_ids), task_group_id=wait.task_group_id,
                              allowed_states=list(wait.allowed_states), skipped_states=list(wait.skipped_states),
                              failed_states=list(wait.failed_states), check_existence=wait.check_existence,
                              sensor_dag_id=run.dag_id, sensor_run_id=run.run_id, sensor_task_id=task.task_id,
                              sensor_map_index=instance.map_index, sensor_try_number=try_number, at=now),
        TaskDeferred(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id, map_index=instance.map_index,
                     try_number=try_number, wait_id=wait_id, external_dag_id=wait.external_dag_id,
                     until=now + sensor.timeout, scheduler_id=scheduler_id, at=now),
    ]


def decide_deferred(run: DagRun, instance: TaskInstance, task: TaskDefinition,
                    now: float) -> tuple[SensorTimedOut, ExternalWaitCancelled] | None:
    """A deferred sensor whose timeout has come ends (failed, or skipped with soft_fail) and cancels its wait."""
    until = instance.not_before
    if until is None or now < until:
        return None
    sensor = task.sensor or DEFAULT_SENSOR
    since = instance.waiting_since if instance.waiting_since is not None else now
    return (SensorTimedOut(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                           map_index=instance.map_index, try_number=instance.try_number,
                           state=SKIPPED if sensor.soft_fail else FAILED, waited=now - since, timeout=sensor.timeout,
                           at=now),
            cancelled(run, instance, task, "the sensor timed out", now))


def cancelled(run: DagRun, instance: TaskInstance, task: TaskDefinition, reason: str,
              now: float) -> ExternalWaitCancelled:
    """The deferred sensor's wait is no longer wanted (its timeout, a clear): on the partition it went to (a
    waiting trigger's: the DAG its try rendered and pushed)."""
    wait = task.external
    dag_id = wait.external_dag_id if wait is not None else run.dag_id
    if wait is not None and wait.after_success:
        dag_id = str(_pushed(instance.values_json).get("trigger_dag_id") or dag_id)
    return ExternalWaitCancelled(dag_id=dag_id,
                                 wait_id=wait_id_of(run.dag_id, run.run_id, instance.task_id, instance.map_index,
                                                    instance.try_number),
                                 reason=reason, at=now)


def deferred(state: SchedulerState, event: TaskDeferred) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    instance = run.instance(event.task_id, event.map_index)
    key = (event.dag_id, event.run_id, instance.key)
    if instance.state == SUCCESS and event.try_number == instance.try_number > instance.deferred_try:
        # after its try's success: waiting for the run it triggered
        instance.state, instance.not_before, instance.waiting_since = DEFERRED, event.until, event.at
        instance.deferred_try = event.try_number
        state.waiting[key] = None
        state.timers.retry(key, event.try_number, event.until)
        return
    if instance.state not in (NONE, UP_FOR_RETRY) or event.try_number <= instance.try_number:
        return
    forget_try(state, key)
    waiting = run.tasks[instance.key] = TaskInstance(event.task_id, DEFERRED, event.try_number,
                                                     owner=event.scheduler_id, queued_at=event.at,
                                                     started_at=event.at, not_before=event.until,
                                                     map_index=event.map_index, waiting_since=event.at)
    waiting.pokes = instance.pokes
    state.waiting[key] = None
    state.timers.retry(key, event.try_number, event.until)


def reported(state: SchedulerState, event: ExternalTaskReported) -> None:
    """The answer ends the deferral it names; a failure counts against the task's retries, as an
    exception from Airflow's sensor does."""
    run = state.runs.get((event.dag_id, event.run_id))
    instance = run.tasks.get(instance_key(event.task_id, event.map_index)) if run is not None else None
    if run is None or instance is None or instance.state != DEFERRED or instance.try_number != event.try_number:
        return
    instance.not_before = None
    dag = state.dags.get(event.dag_id)
    task = dag.tasks.get(event.task_id) if dag is not None else None
    soft = task is not None and task.sensor is not None and task.sensor.soft_fail
    end_try(state, run, instance, SKIPPED if event.outcome == FAILED and soft else event.outcome, event.at)
    if soft and event.outcome == FAILED:  # Airflow's soft_fail: a failure of the sensor skips it, for good
        instance.retryable = False


# -- the awaited side ------------------------------------------------------------------------------

def requested(state: SchedulerState, event: ExternalWaitRequested) -> None:
    state.external_waits[event.wait_id] = event
    state.fresh_waits[event.wait_id] = None


def accepted(state: SchedulerState, event: ExternalWaitAccepted) -> None:
    state.fresh_waits.pop(event.wait_id, None)


def forgotten(state: SchedulerState, event: ExternalWaitAnswered | ExternalWaitCancelled) -> None:
    state.external_waits.pop(event.wait_id, None)
    state.fresh_waits.pop(event.wait_id, None)


def decide_answers(state: SchedulerState, now: float, touched: Collection[RunKey] | None) -> list[ExternalDecision]:
    """The waits read now: those not read yet, and those on a DAG a run of which changed (all: ``touched``
    None). Each met is answered; each read for the first time and not met is accepted."""
    if not state.external_waits:
        return []
    changed = None if touched is None else {dag_id for dag_id, _run_id in touched}
    decided: list[ExternalDecision] = []
    for wait in state.external_waits.values():
        fresh = wait.wait_id in state.fresh_waits
        if not fresh and changed is not None and wait.dag_id not in changed:
            continue
        answer = judge(state, wait)
        if answer is not None:
            decided += _answered(wait, answer, now)
        elif fresh:
            decided.append(ExternalWaitAccepted(dag_id=wait.dag_id, wait_id=wait.wait_id, at=now))
    return decided


def _answered(wait: ExternalWaitRequested, answer: Answer, now: float) -> list[ExternalDecision]:
    outcome, reason, run_id, states = answer
    return [ExternalTaskReported(dag_id=wait.sensor_dag_id, run_id=wait.sensor_run_id, task_id=wait.sensor_task_id,
                                 map_index=wait.sensor_map_index, try_number=wait.sensor_try_number,
                                 wait_id=wait.wait_id, external_dag_id=wait.dag_id, external_run_id=run_id,
                                 outcome=outcome, reason=reason, states=states, at=now),
            ExternalWaitAnswered(dag_id=wait.dag_id, wait_id=wait.wait_id, outcome=outcome, at=now)]


def judge(state: SchedulerState, wait: ExternalWaitRequested) -> Answer | None:
    """The wait's answer as the partition stands, None while it is not met."""
    dag = state.dags.get(wait.dag_id)
    if dag is None:
        return ("failed", f"DAG {wait.dag_id!r} does not exist", "", {}) if wait.check_existence else None
    awaited = awaited_tasks(dag, wait)
    if wait.check_existence:
        missing = _missing(dag, wait, awaited)
        if missing:
            return "failed", missing, "", {}
    if wait.awaited_run_id:
        return _judge_run(state, dag, wait)
    run = run_at(state, wait.dag_id, wait.logical_date)
    when = logical_date_iso(wait.logical_date)
    if run is None:
        gone = state.forgotten.get(wait.dag_id)
        if gone is not None and (wait.logical_date in gone.scheduled or wait.logical_date in gone.backfill):
            return ("failed", f"the run of {wait.dag_id!r} at {when} ended longer ago than the scheduler keeps "
                              "finished runs (TOCK_SCHEDULER_FINISHED_RUNS_KEPT)", "", {})
        return None
    states = awaited_states(run, dag, awaited)
    return _verdict(wait, states, run.run_id, when)


def _judge_run(state: SchedulerState, dag: DagEntry, wait: ExternalWaitRequested) -> Answer | None:
    """A wait for one run (a triggered one): its state, once it has one the wait names."""
    key = (wait.dag_id, wait.awaited_run_id)
    run = state.runs.get(key) or (state.finished[key] if key in state.finished else None)
    if run is None:
        gone = state.forgotten.get(wait.dag_id)
        if gone is not None and gone.has_other(wait.awaited_run_id):
            return ("failed", f"run {wait.awaited_run_id} of {wait.dag_id!r} ended longer ago than the scheduler keeps "
                              "finished runs (TOCK_SCHEDULER_FINISHED_RUNS_KEPT)", wait.awaited_run_id, {})
        return None  # not created yet: its trigger is on its way
    return _verdict(wait, awaited_states(run, dag, []), run.run_id, f"run {run.run_id}")


def _verdict(wait: ExternalWaitRequested, states: dict[str, str], run_id: str, when: str) -> Answer | None:
    what = "the run" if list(states) == [""] else ", ".join(sorted(states))
    of = f"of {wait.dag_id!r} at {when}" if not wait.awaited_run_id else f"of {wait.dag_id!r} ({when})"
    for outcome, named in (("failed", wait.failed_states), ("skipped", wait.skipped_states)):
        hit = sorted(task_id or "the run" for task_id, value in states.items() if value in named)
        if hit:
            return outcome, f"{', '.join(hit)} {of} in {outcome} states {named}", run_id, states
    if states and all(value in wait.allowed_states for value in states.values()):
        return "success", f"{what} {of} in allowed states {wait.allowed_states}", run_id, states
    return None


def awaited_tasks(dag: DagEntry, wait: ExternalWaitRequested | ExternalWaitDefinition) -> list[str]:
    """The task ids a wait names: its own, or its group's (nested groups included); none: the run."""
    group = wait.task_group_id
    if group:
        return [task_id for task_id in dag.order
                if dag.tasks[task_id].task_group == group or dag.tasks[task_id].task_group.startswith(group + ".")]
    return list(wait.task_ids)


def awaited_states(run: DagRun, dag: DagEntry, awaited: list[str]) -> dict[str, str]:
    """Each awaited task's state in the run (a mapped task's, its instances' as a whole), or the run's
    own (key "") when it awaits none."""
    if not awaited:
        return {"": run.finished_state or _RUNNING}
    return {task_id: _task_state(run, dag, task_id) for task_id in awaited}


def _task_state(run: DagRun, dag: DagEntry, task_id: str) -> str:
    task = dag.tasks.get(task_id)
    whole = run.tasks.get(task_id)
    if task is not None and task.mapped is not None and whole is not None and whole.map_count > 0:
        return whole_state({str(item.map_index): item.state for item in mapped_instances(run, task_id)})
    return whole.state if whole is not None else NONE


def run_at(state: SchedulerState, dag_id: str, logical_date: float) -> DagRun | None:
    """The DAG's run of that logical date (the latest created if several), open or finished."""
    found = [run for run in state.runs.values() if run.dag_id == dag_id and run.logical_date == logical_date]
    found += [state.finished[packed.key] for packed in state.finished.of_dag(dag_id)
              if packed.logical_date == logical_date]
    return max(found, key=lambda run: (run.created_at, run.run_id), default=None)


def _missing(dag: DagEntry, wait: ExternalWaitRequested, awaited: list[str]) -> str:
    if wait.task_group_id and not awaited:
        return f"task group {wait.task_group_id!r} does not exist in DAG {wait.dag_id!r}"
    absent = sorted(task_id for task_id in awaited if task_id not in dag.tasks)
    return f"task(s) {', '.join(absent)} do not exist in DAG {wait.dag_id!r}" if absent else ""
