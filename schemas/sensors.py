"""How a sensor waits (topic ``tock.events``, keyed by dag_id): a poke is a short try; when its
condition is not met the try ends ``TaskPoked`` and holds nothing, and the owner of the partition
decides when the next poke comes (``TaskRescheduled``, a timer of its own in the log) or that the
sensor has waited long enough (``SensorTimedOut``). A met condition ends the try ``TaskSucceeded``.
"""

from __future__ import annotations

from schemas.dags import SensorDefinition
from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_DAG

_MOST_DOUBLINGS = 64  # 2 ** 64 poke intervals is past any timeout


@event(EVENTS, route=BY_DAG)
class TaskPoked(EventBase):
    """A sensor's try poked and its condition was not met: the try ends, holding no slot and no process.
    ``reschedule_at``: the sensor asked for its next poke then (Airflow's ``AirflowRescheduleException``,
    a time sensor's target); None: after its poke interval. ``timed_out``: a sensor in mode "poke"
    looped in its one try until its timeout passed."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    reschedule_at: float | None = None
    timed_out: bool = False
    rendered_json: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class TaskRescheduled(EventBase):
    """The owner's decision after a poke that was not met (Airflow's ``up_for_reschedule``): try
    ``next_try_number`` pokes again from ``not_before``. ``waiting_since``: when the sensor's first poke
    of this wait started; its timeout counts from then. ``poke``: how many pokes the wait has made."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    next_try_number: int
    not_before: float
    waiting_since: float
    poke: int
    at: float


@event(EVENTS, route=BY_DAG)
class SensorTimedOut(EventBase):
    """The owner's decision after a poke that was not met: the sensor has waited ``waited`` seconds of its
    ``timeout``, so it ends (Airflow's ``AirflowSensorTimeout``), not retried: ``state`` "skipped" when it
    has ``soft_fail``, else "failed"."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    state: str
    waited: float
    timeout: float
    at: float


def next_poke(sensor: SensorDefinition, poke: int, at: float, waiting_since: float,
              asked: float | None = None) -> float | None:
    """When a sensor whose ``poke``-th poke of this wait (1 the first) ended not met at ``at`` pokes again;
    None when it has waited its timeout already. The poke interval, doubled after each poke with
    ``exponential_backoff`` (no jitter: the decision is in the log anyway), at most ``max_wait``; or the
    moment the poke asked for (``asked``); never past the timeout, so the last poke comes when it ends."""
    if at - waiting_since >= sensor.timeout:
        return None
    deadline = waiting_since + sensor.timeout
    if asked is not None:
        return max(min(asked, deadline), at)
    delay = sensor.poke_interval
    if sensor.exponential_backoff:
        delay = sensor.poke_interval * 2.0 ** min(max(poke - 1, 0), _MOST_DOUBLINGS)
    if sensor.max_wait is not None:
        delay = min(delay, sensor.max_wait)
    return max(min(at + delay, deadline), at)
