"""Reads of the projection tables, shared by ``tock api`` and the CLI (never writes).

Every list takes ``limit``/``offset`` paging and returns plain dicts; JSON columns are
returned decoded under their name without ``_json``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from sqlalchemy import ColumnElement, Engine, Select, Table, and_, case, func, literal, select

from infra.settings import Settings
from projections.db import open_engine
from projections.tables import LIVE, OFFSETS, TASK_EVENT

Row = dict[str, Any]
DEFAULT_LIMIT = 100
SchedulerState = Literal["alive", "dead", "stopped"]


def _decoded(row) -> Row:
    out = {}
    for name, value in row.items():
        if name.endswith("_json") and value is not None:
            out[name[:-5]] = json.loads(value)
        else:
            out[name] = value
    return out


def _page(engine: Engine, query: Select, limit: int, offset: int) -> list[Row]:
    with engine.connect() as connection:
        return [_decoded(row) for row in connection.execute(query.limit(limit).offset(offset)).mappings()]


def _one(engine: Engine, query: Select) -> Row | None:
    rows = _page(engine, query, 1, 0)
    return rows[0] if rows else None


def dags(engine: Engine, *, paused: bool | None = None, active: bool | None = None,
         limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["dag"]
    query = select(table).order_by(table.c.dag_id)
    if paused is not None:
        query = query.where(table.c.is_paused == paused)
    if active is not None:
        query = query.where(table.c.is_active == active)
    return _page(engine, query, limit, offset)


def dag(engine: Engine, dag_id: str) -> Row | None:
    table = LIVE["dag"]
    return _one(engine, select(table).where(table.c.dag_id == dag_id))


def runs(engine: Engine, *, dag_id: str | None = None, state: str | None = None,
         limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["dag_run"]
    query = select(table).order_by(table.c.created_at.desc(), table.c.dag_id, table.c.run_id)
    if dag_id is not None:
        query = query.where(table.c.dag_id == dag_id)
    if state is not None:
        query = query.where(table.c.state == state)
    return _page(engine, query, limit, offset)


def run(engine: Engine, dag_id: str, run_id: str) -> Row | None:
    table = LIVE["dag_run"]
    return _one(engine, select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id))


def task_instances(engine: Engine, dag_id: str, run_id: str, *, state: str | None = None,
                   limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["task_instance"]
    query = select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id).order_by(table.c.task_id)
    if state is not None:
        query = query.where(table.c.state == state)
    return _page(engine, query, limit, offset)


def task_instance(engine: Engine, dag_id: str, run_id: str, task_id: str) -> Row | None:
    table = LIVE["task_instance"]
    return _one(engine, select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id,
                                            table.c.task_id == task_id))


def task_history(engine: Engine, dag_id: str, run_id: str, task_id: str, *,
                 limit: int = 1000, offset: int = 0) -> list[Row]:
    """Every event of one task instance, in log order."""
    table = LIVE[TASK_EVENT]
    query = (select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id, table.c.task_id == task_id)
             .order_by(table.c.topic, table.c.partition, table.c.offset))
    return _page(engine, query, limit, offset)


def import_errors(engine: Engine, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["import_error"]
    return _page(engine, select(table).order_by(table.c.file_path), limit, offset)


def parse_statuses(engine: Engine, *, state: str | None = None, limit: int = DEFAULT_LIMIT,
                   offset: int = 0) -> list[Row]:
    return _by_state(engine, "parse_status", "file_path", state, limit, offset)


def schedulers(engine: Engine, *, now: float, silence_limit: float, state: SchedulerState | None = None,
               limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """Scheduler instances by id, ``state`` as of ``now``: alive, stopped, or dead (alive in the
    table but no heartbeat for more than ``silence_limit`` seconds, e.g. after ``kill -9``)."""
    table = LIVE["scheduler"]
    reported = _scheduler_state(table, now, silence_limit)
    columns = [reported.label("state") if column.name == "state" else column for column in table.c]
    query = select(*columns).order_by(table.c.scheduler_id)
    if state is not None:
        query = query.where(reported == state)
    return _page(engine, query, limit, offset)


def _scheduler_state(table: Table, now: float, silence_limit: float) -> ColumnElement:
    # The table is a fold of the log and knows no clock, so a scheduler killed without
    # SchedulerStopped stays "alive" there; its death is judged here, when read. The same
    # expression is reported and filtered on, so paging by state stays consistent.
    silent = and_(table.c.state == "alive", table.c.last_heartbeat < now - silence_limit)
    return case((silent, literal("dead")), else_=table.c.state)


def scheduler_silence_limit(settings: Settings) -> float:
    """Seconds without a SchedulerHeartbeat after which a scheduler that did not stop is dead.

    The session timeout: by then the group has moved a silent scheduler's partitions away.
    Never less than two heartbeat intervals, so one late beat does not read as a death.
    """
    return max(settings.scheduler_session_timeout, 2 * settings.task_heartbeat_seconds)


def _by_state(engine: Engine, table_name: str, order: str, state: str | None, limit: int, offset: int) -> list[Row]:
    table = LIVE[table_name]
    query = select(table).order_by(table.c[order])
    if state is not None:
        query = query.where(table.c.state == state)
    return _page(engine, query, limit, offset)


def projected_offsets(engine: Engine) -> list[Row]:
    """Next offset the tables reflect, per topic partition."""
    table = LIVE[OFFSETS]
    return _page(engine, select(table).order_by(table.c.topic, table.c.partition), 100_000, 0)


def count(engine: Engine, table_name: str) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(LIVE[table_name])).scalar_one()


def list_dags(settings: Settings) -> list[Row]:
    """Every DAG the tables know (for ``tock dags list``), active ones first by id."""
    engine = open_engine(settings)
    try:
        rows = dags(engine, limit=100_000)
    finally:
        engine.dispose()
    return sorted(rows, key=lambda row: (not row["is_active"], row["dag_id"]))
