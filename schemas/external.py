"""Waiting on another DAG (topic ``tock.events``): Airflow's ``ExternalTaskSensor``, decided on the log
by the owners of two partitions, with no poke (services/scheduler/core/external.py).

Each hop is a record where it lands and a mark where it leaves, in one transaction of the side that
writes it, so a crash or a takeover on either side neither drops nor repeats one:

- **the sensor's DAG**: when the sensor may run, its owner writes ``ExternalWaitRequested`` on the
  awaited DAG's partition and marks the sensor ``deferred`` (``TaskDeferred``): no try, no worker slot,
  no process, no pool slot while it waits;
- **the awaited DAG**: its owner keeps the waits on its DAG, and when the awaited tasks (or the run) of
  the awaited logical date reach a state the wait names, writes ``ExternalTaskReported`` on the sensor's
  partition, marked by ``ExternalWaitAnswered`` (``ExternalWaitAccepted`` says it read a wait not met
  yet). Folding the report ends the sensor.
- The sensor's timeout is a timer of its own partition: ``SensorTimedOut``, with ``ExternalWaitCancelled``
  to the awaited partition, which then forgets the wait (a clear of the deferred sensor cancels it too).
"""

from __future__ import annotations

from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_DAG

# Outcomes of a wait (the state the sensor ends in).
WAIT_OUTCOMES = ("success", "skipped", "failed")


def wait_id_of(dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """A sensor's wait is its deferral: one per try number of the instance."""
    return f"{dag_id}|{run_id}|{task_id}|{map_index}|{try_number}"


@event(EVENTS, route=BY_DAG, version=2)
class ExternalWaitRequested(EventBase):
    """A sensor waits on DAG ``dag_id`` (this record is on that DAG's partition): for its run of
    ``logical_date`` (or the run ``awaited_run_id``: a run the task triggered), the tasks ``task_ids`` (or those
    of the group ``task_group_id``; neither: the run itself) to be in ``allowed_states`` (then the sensor
    succeeds), or one of them in ``skipped_states`` (it is skipped) or ``failed_states`` (it fails).
    ``check_existence``: a DAG or task that does not exist fails it at once. ``sensor_*`` name the
    deferred sensor, where the answer goes.
    v2 added ``awaited_run_id`` (a ``TriggerDagRunOperator`` waiting for the run it triggered)."""

    dag_id: str
    wait_id: str
    logical_date: float
    awaited_run_id: str = ""
    task_ids: list[str]
    task_group_id: str = ""
    allowed_states: list[str]
    skipped_states: list[str]
    failed_states: list[str]
    check_existence: bool = False
    sensor_dag_id: str
    sensor_run_id: str
    sensor_task_id: str
    sensor_map_index: int = -1
    sensor_try_number: int
    at: float


@event(EVENTS, route=BY_DAG)
class TaskDeferred(EventBase):
    """The sensor's side of ``ExternalWaitRequested``: try ``try_number`` of the sensor is ``deferred``
    (Airflow's state), waiting on ``external_dag_id`` until an answer or ``until`` (its timeout)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    wait_id: str
    external_dag_id: str
    until: float
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class ExternalTaskReported(EventBase):
    """The awaited DAG's owner answers a wait (this record is on the sensor's partition): the sensor ends
    ``outcome`` ("success", "skipped" or "failed"), ``reason`` saying why, with the awaited ``states``
    (task id, or "" for the run, -> its state) of run ``external_run_id`` ("" none)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    wait_id: str
    external_dag_id: str
    external_run_id: str = ""
    outcome: str
    reason: str
    states: dict[str, str]
    at: float


@event(EVENTS, route=BY_DAG)
class ExternalWaitAccepted(EventBase):
    """The awaited DAG's owner has read wait ``wait_id`` and it is not met yet: from now on it looks again
    only when a run of DAG ``dag_id`` changes."""

    dag_id: str
    wait_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class ExternalWaitAnswered(EventBase):
    """The awaited DAG's side of ``ExternalTaskReported``: wait ``wait_id`` on DAG ``dag_id`` is answered
    (``outcome``), and forgotten."""

    dag_id: str
    wait_id: str
    outcome: str
    at: float


@event(EVENTS, route=BY_DAG)
class ExternalWaitCancelled(EventBase):
    """The sensor's owner no longer waits (``reason``: it timed out, or it was cleared): the awaited DAG's
    partition forgets wait ``wait_id``; an answer already on its way is ignored by the sensor's."""

    dag_id: str
    wait_id: str
    reason: str
    at: float


@event(EVENTS, route=BY_DAG)
class TimeSensorMet(EventBase):
    """A time sensor's moment (``moment``) has come: the instance succeeds, with no try run (try
    ``try_number`` is its deferral's, or a new one when the moment had passed when it could run)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    moment: float
    at: float


@event(EVENTS, route=BY_DAG)
class ExternalClearsSent(EventBase):
    """The clears the recursive clear ``request_id`` of DAG ``dag_id`` asked of other DAGs through its
    ExternalTaskMarkers (``ClearTask`` on their partitions) are written: none is due any more."""

    dag_id: str
    request_id: str
    at: float
