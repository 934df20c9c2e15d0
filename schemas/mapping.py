"""Dynamic task mapping's decisions (topic ``tock.events``, keyed by dag_id): how many instances a
mapped task has in a run, decided once by the owner of the DAG's partition when the task is ready to
run, so a takeover or a replay expands it the same way (it only ever reads these events).
"""

from __future__ import annotations

from dataclasses import field

from schemas.declare import EVENTS, EventBase, event, record
from schemas.routing import BY_DAG


@record
class MapSource:
    """Where one input of an expansion came from: its argument ``name`` ("" for expand_kwargs), its
    ``length``, and the upstream try whose value it is (``task_id`` and ``try_number``; "" and 0 for a
    literal of the definition; a mapped upstream's value is the list of its instances', try 0)."""

    name: str = ""
    length: int
    task_id: str = ""
    try_number: int = 0


@event(EVENTS, route=BY_DAG)
class TaskMapExpanded(EventBase):
    """The mapped task has ``count`` instances in this run, map indexes 0..count-1 (expand: the product
    of its inputs' lengths; expand_kwargs: its one input's length). 0: none, and the task is skipped
    (Airflow's behaviour for an empty expansion)."""

    dag_id: str
    run_id: str
    task_id: str
    count: int
    sources: list[MapSource] = field(default_factory=list)
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class TaskMapFailed(EventBase):
    """The mapped task cannot expand in this run and failed without a try: what it maps over is not a
    list or dict, or it would have more instances than its ``max_map_length`` (``reason`` names the
    value's type or length)."""

    dag_id: str
    run_id: str
    task_id: str
    reason: str
    scheduler_id: str
    at: float
