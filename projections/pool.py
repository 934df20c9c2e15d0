"""Read model ``pool``: each pool's size and what holds it, from its ledger in ``tock.events``
(schemas/pools.py).

One row per pool: its slots and description (``slots`` None once deleted), the slots its grants hold
(``occupied_slots``), the tries holding them and the tries waiting for a grant (``waiting_tries``, with
the slots they ask for: Airflow's ``scheduled_slots``). The grants and asks are kept by key in the row,
so a release is applied to exactly the grant (or the ask) it names, however the records are replayed.
"""

from __future__ import annotations

import json

from projections.records import Key, Record, Row
from schemas import DeletePool, PoolSlotsGranted, PoolSlotsReleased, PoolSlotsRequested, SetPool

TABLE = "pool"
_LEDGER = (SetPool, DeletePool, PoolSlotsRequested, PoolSlotsGranted, PoolSlotsReleased)


def empty(pool: str) -> Row:
    return {"pool": pool, "slots": None, "description": None, "occupied_slots": 0, "granted_tries": 0,
            "waiting_tries": 0, "waiting_slots": 0, "grants_json": "{}", "asks_json": "{}", "updated_at": None,
            "deleted_at": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    return (event.pool,) if isinstance(event, _LEDGER) else None


def evolve(row: Row | None, record: Record) -> Row:
    event = record.event
    row = {**(row or empty(event.pool)), "updated_at": event.at}
    match event:
        case SetPool():
            return {**row, "slots": event.slots, "description": event.description, "deleted_at": None}
        case DeletePool():
            return {**row, "slots": None, "deleted_at": event.at}
        case PoolSlotsRequested() | PoolSlotsGranted() | PoolSlotsReleased():
            return _ledger(row, event)
    raise TypeError(f"pool read model cannot apply {type(event).__name__}")


def _ledger(row: Row, event: PoolSlotsRequested | PoolSlotsGranted | PoolSlotsReleased) -> Row:
    grants, asks = json.loads(row["grants_json"]), json.loads(row["asks_json"])
    key = f"{event.dag_id}|{event.run_id}|{event.task_id}|{event.map_index}|{event.try_number}"
    if isinstance(event, PoolSlotsRequested) and key not in grants:
        asks.setdefault(key, event.slots)
    elif isinstance(event, PoolSlotsGranted) and key in asks:
        grants[key] = asks.pop(key)
    elif isinstance(event, PoolSlotsReleased):
        grants.pop(key, None)
        asks.pop(key, None)
    return {**row, "grants_json": json.dumps(grants, sort_keys=True), "asks_json": json.dumps(asks, sort_keys=True),
            "occupied_slots": sum(grants.values()), "granted_tries": len(grants),
            "waiting_tries": len(asks), "waiting_slots": sum(asks.values())}
