"""What each executor is doing, read from folds of the log: no counter is kept anywhere.

Queued and running tries per executor and queue are counted in the ``task_instance`` read
model (each try's executor and queue are those its ``TaskQueued`` wrote); workers come from
``executor_worker`` (WorkerHeartbeat / WorkerStopped). The local executor's workers are the
schedulers, whose children run its tries (``scheduler``, from SchedulerHeartbeat).

:func:`live_tries` is the same count over a scheduler's in-memory tries, for its parallelism.
:func:`executor_status` assembles the report from plain rows; :func:`read_executor_status`
queries them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from sqlalchemy import Engine, and_, func, select

from projections.tables import LIVE

Row = dict[str, Any]
LOCAL = "local"
ACTIVE_STATES = ("queued", "running")
SILENT_BEATS = 3  # a worker is alive while its last heartbeat is younger than this many intervals


class Try(Protocol):
    executor: str
    queue: str


def live_tries(tries: Iterable[Try]) -> dict[str, Counter[str]]:
    """Tries per executor and queue: ``{executor: Counter({queue: n})}`` (pure; e.g. a scheduler's
    live tries, to bound each executor's parallelism by what its own memory holds)."""
    counts: dict[str, Counter[str]] = {}
    for live in tries:
        counts.setdefault(live.executor, Counter())[live.queue] += 1
    return counts


def silence_limit(heartbeat_seconds: float) -> float:
    """Seconds after its last heartbeat a worker (or a scheduler, as the local executor's) reads as dead."""
    return SILENT_BEATS * heartbeat_seconds


# --- the report, from plain rows (pure) ---------------------------------------------------

def executor_status(try_counts: Iterable[Row], task_heartbeats: Mapping[str, float], workers: Iterable[Row],
                    schedulers: Iterable[Row], *, now: float, limit: float,
                    configured: Iterable[str] = ()) -> list[Row]:
    """One entry per executor (configured ones, and any with tries or workers), by name.

    ``try_counts``: rows of executor, queue, state, tries. ``task_heartbeats``: executor -> last
    task heartbeat. ``workers``: executor_worker rows; ``schedulers``: scheduler rows (the local
    executor's workers). A worker is alive, stopped, or dead (silent for more than ``limit`` s).
    """
    queues = _queues(try_counts)
    by_executor: dict[str, list[Row]] = {}
    for row in workers:
        by_executor.setdefault(row["executor"], []).append(_worker(row, now, limit))
    names = {*configured, *queues, *by_executor}
    if LOCAL in names:
        by_executor.setdefault(LOCAL, []).extend(_scheduler_as_worker(row, now, limit) for row in schedulers)
    return [_executor(name, queues.get(name, {}), by_executor.get(name, []), task_heartbeats.get(name), name in
                      set(configured)) for name in sorted(names)]


def _queues(try_counts: Iterable[Row]) -> dict[str, dict[str, Row]]:
    queues: dict[str, dict[str, Row]] = {}
    for row in try_counts:
        entry = queues.setdefault(row["executor"], {}).setdefault(
            row["queue"], {"queue": row["queue"], "queued": 0, "running": 0})
        entry[row["state"]] += row["tries"]
    return queues


def _executor(name: str, queues: dict[str, Row], workers: list[Row], last_task_heartbeat: float | None,
              configured: bool) -> Row:
    listed = [queues[queue] for queue in sorted(queues)]
    workers = sorted(workers, key=lambda worker: worker["worker"])
    return {"executor": name, "configured": configured,
            "queued": sum(queue["queued"] for queue in listed), "running": sum(queue["running"] for queue in listed),
            "queues": listed, "workers_alive": sum(worker["state"] == "alive" for worker in workers),
            "workers_seen": len(workers), "last_task_heartbeat": last_task_heartbeat, "workers": workers}


def _worker(row: Row, now: float, limit: float) -> Row:
    return {"worker": row["worker"], "kind": "worker", "state": _state(row, now, limit),
            "hostname": row["hostname"], "pid": row["pid"], "queues": _decoded(row["queues_json"]),
            "concurrency": row["concurrency"], "last_heartbeat": row["last_heartbeat"],
            "age": _age(row["last_heartbeat"], now), "stopped_at": row["stopped_at"]}


def _scheduler_as_worker(row: Row, now: float, limit: float) -> Row:
    stopped_at = row["stopped_at"] if row["state"] == "stopped" else None
    as_worker = {"last_heartbeat": row["last_heartbeat"], "stopped_at": stopped_at}
    return {"worker": row["scheduler_id"], "kind": "scheduler", "state": _state(as_worker, now, limit),
            "hostname": row["hostname"], "pid": row["pid"], "queues": [], "concurrency": None,
            "last_heartbeat": row["last_heartbeat"], "age": _age(row["last_heartbeat"], now),
            "stopped_at": stopped_at}


def _state(row: Row, now: float, limit: float) -> str:
    if row["stopped_at"] is not None:
        return "stopped"
    alive = row["last_heartbeat"] is not None and now - row["last_heartbeat"] <= limit
    return "alive" if alive else "dead"


def _age(last_heartbeat: float | None, now: float) -> float | None:
    return None if last_heartbeat is None else round(max(now - last_heartbeat, 0.0), 1)


def _decoded(text: str | None) -> list:
    return json.loads(text) if text else []


# --- the queries ----------------------------------------------------------------------------

def try_counts(engine: Engine) -> list[Row]:
    """Queued and running tries per executor, queue and state, from the task_instance read model."""
    table = LIVE["task_instance"]
    query = (select(table.c.executor, table.c.queue, table.c.state, func.count().label("tries"))
             .where(table.c.state.in_(ACTIVE_STATES))
             .group_by(table.c.executor, table.c.queue, table.c.state))
    with engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def task_heartbeats(engine: Engine) -> dict[str, float]:
    """Per executor, the latest heartbeat of a try that is its task instance's current try."""
    table = LIVE["task_instance"]
    current = and_(table.c.heartbeat_try == table.c.try_number, table.c.last_heartbeat.is_not(None))
    query = select(table.c.executor, func.max(table.c.last_heartbeat)).where(current).group_by(table.c.executor)
    with engine.connect() as connection:
        return {executor: last for executor, last in connection.execute(query) if executor is not None}


def _all_rows(engine: Engine, table_name: str) -> list[Row]:
    table = LIVE[table_name]
    with engine.connect() as connection:
        return [dict(row) for row in connection.execute(select(table)).mappings()]


def read_executor_status(engine: Engine, *, now: float, limit: float, configured: Iterable[str] = ()) -> list[Row]:
    """:func:`executor_status` over the live tables."""
    return executor_status(try_counts(engine), task_heartbeats(engine), _all_rows(engine, "executor_worker"),
                           _all_rows(engine, "scheduler"), now=now, limit=limit, configured=configured)
