"""Pools: a global cap on the slots tries hold, owned by one partition per pool (schemas/pools.py).

Two sides, each a fold of its own partitions and the decisions it writes from them:

- **The pool's side** (the partition ``BY_POOL`` puts the pool on) keeps its ledger: the pool's size,
  the asks not granted yet, the grants not released. Each turn it grants the asks that fit, highest
  priority first, then the oldest ask (a big ask that does not fit lets smaller ones by, as Airflow's
  scheduler does). Occupancy is the sum of the grants in the ledger: never more than the size, as
  only this fold grants, and a replay grants nothing twice.
- **The DAG's side** gates a try that names a pool: its TaskQueued becomes an ask, and the try is queued
  once its grant is folded. It keeps every grant its tries hold (``held``) until it writes the release,
  which it does once the grant is not needed: the try ended (any way: success, failure, a poke not
  met, killed, declared dead), or the instance no longer waits for it (cleared, marked, its run gone,
  its DAG paused). A crash between a try's end and the release loses nothing: the next owner folds the
  grant and the end, and writes the release.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from schemas import (
    DeletePool,
    PoolSlotsGranted,
    PoolSlotsReleased,
    PoolSlotsRequested,
    SetPool,
    TaskPoolGranted,
    TaskPoolReleased,
    TaskPoolRequested,
    TaskQueued,
)
from services.scheduler.core.model import (
    ACTIVE,
    NONE,
    UP_FOR_RETRY,
    Ask,
    GrantKey,
    PoolLedger,
    SchedulerState,
    TaskInstance,
    instance_key,
)

PoolDecision: TypeAlias = (PoolSlotsRequested | TaskPoolRequested | PoolSlotsGranted | TaskPoolGranted
                           | PoolSlotsReleased | TaskPoolReleased)


def key_of(event: Any) -> GrantKey:
    return (event.pool, event.dag_id, event.run_id, event.task_id, event.map_index, event.try_number)


# -- the pool's side: folds ----------------------------------------------------------------------

def set_pool(ledger: PoolLedger, event: SetPool) -> None:
    ledger.sizes[event.pool] = (event.slots, event.description)


def delete_pool(ledger: PoolLedger, event: DeletePool) -> None:
    ledger.sizes.pop(event.pool, None)


def slots_requested(ledger: PoolLedger, event: PoolSlotsRequested) -> None:
    key = key_of(event)
    if key not in ledger.grants and key not in ledger.asks:
        ledger.asks[key] = Ask(event.slots, event.priority, ledger.asked)
        ledger.asked += 1


def slots_granted(ledger: PoolLedger, event: PoolSlotsGranted) -> None:
    key = key_of(event)
    if ledger.asks.pop(key, None) is not None:
        ledger.grants[key] = event.slots


def slots_released(ledger: PoolLedger, event: PoolSlotsReleased) -> None:
    key = key_of(event)
    ledger.grants.pop(key, None)
    ledger.asks.pop(key, None)  # an ask withdrawn before its grant


# -- the pool's side: deciding -------------------------------------------------------------------

def decide_grants(ledger: PoolLedger, scheduler_id: str, now: float) -> list[PoolDecision]:
    """The asks that fit under their pool's size now, in priority order; each granted on both sides."""
    if not ledger.asks:
        return []
    free = {pool: slots - ledger.occupied(pool) for pool, (slots, _description) in ledger.sizes.items()}
    if not any(room > 0 for room in free.values()):
        return []  # the common turn of a busy pool: nothing fits, nothing to sort
    decided: list[PoolDecision] = []
    for key, ask in sorted(ledger.asks.items(), key=lambda item: (-item[1].priority, item[1].order)):
        pool = key[0]
        if free.get(pool, 0) >= ask.slots:
            free[pool] -= ask.slots
            decided += _granted(key, ask.slots, scheduler_id, now)
    return decided


# -- the DAG's side --------------------------------------------------------------------------------

def gate(state: SchedulerState, events: Sequence[Any], now: float) -> list[Any]:
    """``events`` with each TaskQueued of a task that names a pool through its gate: queued if its try's
    slots are granted, else asked for (once), else left out while the ask waits."""
    gated: list[Any] = []
    for event in events:
        if not isinstance(event, TaskQueued):
            gated.append(event)
            continue
        dag = state.dags.get(event.dag_id)
        task = dag.tasks.get(event.task_id) if dag is not None else None
        if dag is None or task is None or not task.pool:
            gated.append(event)
            continue
        instance = state.instance((event.dag_id, event.run_id, _instance_key(event)))
        if instance is not None and instance.pool_granted == event.try_number:
            gated.append(event)
        elif instance is None or instance.pool_asked != event.try_number:
            key = (task.pool, event.dag_id, event.run_id, event.task_id, event.map_index, event.try_number)
            gated += _asked(key, task.pool_slots, dag.priorities.get(task.task_id, 1), now)
    return gated


def decide_releases(state: SchedulerState, now: float) -> list[PoolDecision]:
    """A release for each grant held that is not needed any more, on both sides."""
    decided: list[PoolDecision] = []
    for key, slots in state.pool_holdings.items():
        reason = _not_needed(state, key)
        if reason:
            decided += _released(key, slots, reason, now)
    return decided


def _not_needed(state: SchedulerState, key: GrantKey) -> str:
    """Why the grant is not needed any more ("" it is: its try is queued or running, or waits for it)."""
    _pool, dag_id, run_id, task_id, map_index, try_number = key
    run = state.runs.get((dag_id, run_id))
    if run is None:
        return "its run is over"
    instance = run.tasks.get(instance_key(task_id, map_index)) or TaskInstance(task_id, map_index=map_index)
    if instance.try_number == try_number:
        return "" if instance.state in ACTIVE else f"the try ended {instance.state}"
    waiting = instance.state in (NONE, UP_FOR_RETRY) and instance.try_number == try_number - 1
    if waiting and instance.pool_granted == try_number:
        return "its DAG is paused" if dag_id in state.paused else ""
    return "the task instance does not wait for it any more"


def task_requested(state: SchedulerState, event: TaskPoolRequested) -> None:
    instance = _waiting(state, event)
    if instance is not None:
        instance.pool_asked = event.try_number


def task_granted(state: SchedulerState, event: TaskPoolGranted) -> None:
    state.pool_holdings[key_of(event)] = event.slots  # released once not needed, whatever happens next
    instance = _waiting(state, event)
    if instance is not None and instance.pool_asked == event.try_number:
        instance.pool_granted = event.try_number


def task_released(state: SchedulerState, event: TaskPoolReleased) -> None:
    state.pool_holdings.pop(key_of(event), None)
    instance = _waiting(state, event)
    if instance is not None and instance.pool_granted == event.try_number:  # e.g. paused: ask again later
        instance.pool_asked = instance.pool_granted = 0


def _waiting(state: SchedulerState, event: TaskPoolRequested | TaskPoolGranted | TaskPoolReleased
             ) -> TaskInstance | None:
    """The instance if it waits to queue the event's try (its previous try is its current one)."""
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return None
    instance = run.instance(event.task_id, event.map_index)  # (an instance not decided yet is created NONE)
    if instance.state not in (NONE, UP_FOR_RETRY) or instance.try_number != event.try_number - 1:
        return None
    return instance


def _instance_key(event: TaskQueued) -> str:
    return instance_key(event.task_id, event.map_index)


def _ids(key: GrantKey) -> dict[str, Any]:
    _pool, dag_id, run_id, task_id, map_index, try_number = key
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index, "try_number": try_number}


def _asked(key: GrantKey, slots: int, priority: int, now: float) -> list[PoolDecision]:
    pool, ids = key[0], _ids(key)
    return [PoolSlotsRequested(pool=pool, slots=slots, priority=priority, **ids, at=now),
            TaskPoolRequested(pool=pool, slots=slots, **ids, at=now)]


def _granted(key: GrantKey, slots: int, scheduler_id: str, now: float) -> list[PoolDecision]:
    pool, ids = key[0], _ids(key)
    return [PoolSlotsGranted(pool=pool, slots=slots, scheduler_id=scheduler_id, **ids, at=now),
            TaskPoolGranted(pool=pool, slots=slots, scheduler_id=scheduler_id, **ids, at=now)]


def _released(key: GrantKey, slots: int, reason: str, now: float) -> list[PoolDecision]:
    pool, ids = key[0], _ids(key)
    return [PoolSlotsReleased(pool=pool, slots=slots, reason=reason, **ids, at=now),
            TaskPoolReleased(pool=pool, slots=slots, reason=reason, **ids, at=now)]


def occupancy(ledger: PoolLedger) -> Iterable[tuple[str, int, int]]:
    """(pool, its size, the slots granted) of each pool of the ledger."""
    return ((pool, slots, ledger.occupied(pool)) for pool, (slots, _description) in sorted(ledger.sizes.items()))
