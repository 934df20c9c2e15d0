"""Pools (topic ``tock.events``): a global cap on the slots tries of tasks that name the pool hold at
once, whichever DAG, partition or scheduler they are on (services/scheduler/core/pools.py).

A pool's ledger is on one partition (``BY_POOL``, key ``pool/<name>``), and only that partition's owner
grants its slots. Each step is written by one owner, fenced by its transaction, as two records: one on the
pool's partition (the ledger: ``PoolSlots*``) and one on the task's DAG's partition (``TaskPool*``), so each
side folds what it needs from its own partitions:

- the DAG's owner asks for a try's slots (``PoolSlotsRequested`` + ``TaskPoolRequested``);
- the pool's owner grants them when they fit, highest priority first (``PoolSlotsGranted`` +
  ``TaskPoolGranted``); only then is the try queued;
- the DAG's owner gives them back once the try's end is in the log, or the grant is not needed any more
  (``PoolSlotsReleased`` + ``TaskPoolReleased``).

A crash or a takeover on either side folds the same records: a grant is never lost (its release is due
until its ``TaskPoolReleased`` is in the log) and never doubled (the ledger grants a try's slots once).
"""

from __future__ import annotations

import re

from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_DAG, BY_POOL

DEFAULT_POOL = "default_pool"  # Airflow's: a task with no pool is in it; in Tock it has no cap


@event(EVENTS, route=BY_POOL)
class SetPool(EventBase):
    """A command: create the pool, or resize it (``slots``; fewer than those held takes none back: no new
    grant until they fit), with its description."""

    pool: str
    slots: int
    description: str = ""
    request_id: str = ""
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_POOL)
class DeletePool(EventBase):
    """A command: the pool is gone. Slots it granted stay held until their tries end; tries that ask for
    it wait until it exists again."""

    pool: str
    request_id: str = ""
    requested_by: str = ""
    at: float


@event(EVENTS, route=BY_POOL)
class PoolSlotsRequested(EventBase):
    """The ledger: a try (``dag_id``, ``run_id``, ``task_id``, ``map_index``, ``try_number``) asks for
    ``slots`` of the pool, with its task's priority. Written by its DAG's owner."""

    pool: str
    slots: int
    priority: int = 1
    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    at: float


@event(EVENTS, route=BY_POOL)
class PoolSlotsGranted(EventBase):
    """The ledger: the pool's owner gave the try its slots (they fit under the pool's size)."""

    pool: str
    slots: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_POOL)
class PoolSlotsReleased(EventBase):
    """The ledger: the try's slots are free again (its end is in the log, or its grant was not needed:
    ``reason``). Also withdraws an ask not granted yet."""

    pool: str
    slots: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    reason: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class TaskPoolRequested(EventBase):
    """The DAG's side of ``PoolSlotsRequested``: the task instance waits for the pool's grant before the
    try is queued (Airflow's ``scheduled``)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    pool: str
    slots: int
    at: float


@event(EVENTS, route=BY_DAG)
class TaskPoolGranted(EventBase):
    """The DAG's side of ``PoolSlotsGranted``, written by the pool's owner: the try may be queued."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    pool: str
    slots: int
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class TaskPoolReleased(EventBase):
    """The DAG's side of ``PoolSlotsReleased``: the release is written, nothing of the grant is due."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    pool: str
    slots: int
    reason: str = ""
    at: float


POOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$")
MOST_SLOTS = 1_000_000


def pool_problem(pool: str, slots: int | None = None) -> str:
    """What is wrong with a pool command's name (and size), in words ("" nothing): the CLI and the API
    refuse it before anything is appended."""
    if not POOL_NAME.match(pool):
        return (f"a pool's name is 1 to 250 letters, digits, '_', '.' or '-' (not starting with '.' or '-'), "
                f"got {pool!r}")
    if pool == DEFAULT_POOL:
        return (f"{DEFAULT_POOL} has no cap in Tock: tasks that name no pool are limited by their DAG's and "
                "executor's limits only; give the tasks to cap a pool of their own (pool='...')")
    if slots is not None and not 0 <= slots <= MOST_SLOTS:
        return f"a pool's slots are 0 to {MOST_SLOTS}, got {slots}"
    return ""
