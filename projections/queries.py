"""Reads of the projection tables, shared by ``tock api`` and the CLI (never writes).

Every list takes ``limit``/``offset`` paging and returns plain dicts; JSON columns are
returned decoded under their name without ``_json``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from sqlalchemy import ColumnElement, Engine, Select, Table, and_, case, func, literal, or_, select

from infra.settings import Settings
from projections.db import open_engine
from projections.tables import LIVE, OFFSETS, TASK_EVENT
from schemas import schedule as cron

Row = dict[str, Any]
DEFAULT_LIMIT = 100
SchedulerState = Literal["alive", "dead", "stopped"]


def _decoded(row) -> Row:
    out = {}
    for name, value in row.items():
        if name.endswith("_json"):  # decoded under its name without the suffix (None stays None)
            out[name[:-5]] = None if value is None else json.loads(value)
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
    return with_intervals(engine, [with_duration(row) for row in _page(engine, query, limit, offset)])


def run(engine: Engine, dag_id: str, run_id: str) -> Row | None:
    table = LIVE["dag_run"]
    row = _one(engine, select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id))
    return None if row is None else with_intervals(engine, [with_duration(row)])[0]


def with_intervals(engine: Engine, rows: list[Row]) -> list[Row]:
    """Run rows with ``data_interval_start`` / ``data_interval_end``, computed by the scheduler's rule
    (schemas/schedule.py ``data_interval``) from their DAG's current definition: its schedule, time
    zone and start date."""
    table = LIVE["dag"]
    dag_ids = sorted({row["dag_id"] for row in rows})
    query = select(table.c.dag_id, table.c.schedule, table.c.timezone, table.c.start_date).where(
        table.c.dag_id.in_(dag_ids))
    with engine.connect() as connection:
        dags = {dag["dag_id"]: dag for dag in connection.execute(query).mappings()} if dag_ids else {}
    return [{**row, **run_interval(row, dags.get(row["dag_id"]))} for row in rows]


def run_interval(run: Row, dag: Any) -> Row:
    """A run's data interval, or None for both when its logical date or its DAG's time zone is unknown."""
    logical = run.get("logical_date")
    try:
        start, end = (None, None) if logical is None else cron.data_interval(
            dag["schedule"] if dag else None, run.get("run_type") or "", logical,
            (dag["timezone"] if dag else None) or cron.UTC_NAME, start_date=dag["start_date"] if dag else None)
    except ValueError:  # a time zone this host's zoneinfo does not know
        start, end = None, None
    return {"data_interval_start": start, "data_interval_end": end}


def with_duration(row: Row) -> Row:
    """A run row with ``duration``: seconds from its creation to its (latest) end; None while it runs."""
    ended, created = row.get("end_date"), row.get("created_at")
    return {**row, "duration": None if ended is None or created is None else ended - created}


def task_instances(engine: Engine, dag_id: str, run_id: str, *, state: str | None = None,
                   limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["task_instance"]
    query = (select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id)
             .order_by(table.c.task_id, table.c.map_index))
    if state is not None:
        query = query.where(table.c.state == state)
    return _page(engine, query, limit, offset)


def task_instance(engine: Engine, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Row | None:
    """A task instance (``map_index``: instance N of a mapped task; -1 a task, or a mapped task as a whole)."""
    table = LIVE["task_instance"]
    return _one(engine, select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id,
                                            table.c.task_id == task_id, table.c.map_index == map_index))


def is_mapped_whole(row: Row | None) -> bool:
    """Whether a task_instance row is a mapped task as a whole (expanded: its instances have the tries)."""
    return row is not None and row["map_index"] == -1 and row.get("map_count") is not None


def mapped_task_instances(engine: Engine, dag_id: str, run_id: str, task_id: str,
                          limit: int = 100_000) -> list[Row]:
    """The instances of a mapped task in a run (map index 0 up), without the task as a whole."""
    table = LIVE["task_instance"]
    query = (select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id, table.c.task_id == task_id,
                                 table.c.map_index >= 0).order_by(table.c.map_index))
    return _page(engine, query, limit, 0)


TASK_SHAPE = ("task_group", "is_setup", "is_teardown", "trigger_rule")


def task_shapes(engine: Engine, dag_id: str) -> dict[str, Row]:
    """Task id -> its task group ("" none), whether a setup or a teardown, and its trigger rule, as the
    DAG's current definition says (a task no longer defined is absent)."""
    table = LIVE["dag"]
    with engine.connect() as connection:
        tasks_json = connection.execute(select(table.c.tasks_json).where(table.c.dag_id == dag_id)).scalar()
    tasks = json.loads(tasks_json) if tasks_json else []
    return {task["task_id"]: {"task_group": task.get("task_group", ""), "is_setup": task.get("is_setup", False),
                              "is_teardown": task.get("is_teardown", False),
                              "trigger_rule": task.get("trigger_rule", "all_success")} for task in tasks}


def with_task_shape(engine: Engine, dag_id: str, rows: list[Row]) -> list[Row]:
    """Task-instance rows with their task's ``task_group``, ``is_setup`` and ``is_teardown`` (None when the
    task is no longer defined). ``trigger_rule`` stays the one a skip or upstream failure recorded (the rule
    that decided it); for any other instance it is the task's rule in the current definition."""
    shapes = task_shapes(engine, dag_id) if rows else {}
    unknown = dict.fromkeys(TASK_SHAPE)
    return [{**row, **shapes.get(row["task_id"], unknown),
             "trigger_rule": row["trigger_rule"] or shapes.get(row["task_id"], unknown)["trigger_rule"]}
            for row in rows]


def task_history(engine: Engine, dag_id: str, run_id: str, task_id: str, *,
                 limit: int = 1000, offset: int = 0, map_index: int | None = None) -> list[Row]:
    """Every event of one task instance, in log order (``map_index``: of one instance of a mapped task
    and of the task as a whole; None: of all its instances)."""
    table = LIVE[TASK_EVENT]
    query = (select(table).where(table.c.dag_id == dag_id, table.c.run_id == run_id, table.c.task_id == task_id)
             .order_by(table.c.topic, table.c.partition, table.c.offset))
    if map_index is not None:
        query = query.where(table.c.map_index.in_([-1, map_index]))
    return _page(engine, query, limit, offset)


def task_instances_in_state(engine: Engine, dag_id: str, state: str, *, start: float | None = None,
                            end: float | None = None, limit: int = 100_000) -> list[Row]:
    """Task instances of ``dag_id`` in ``state`` whose run's logical date is in [start, end], by run then task."""
    table, runs_table = LIVE["task_instance"], LIVE["dag_run"]
    query = (select(table).join(runs_table, and_(runs_table.c.dag_id == table.c.dag_id,
                                                 runs_table.c.run_id == table.c.run_id))
             .where(table.c.dag_id == dag_id, table.c.state == state)
             .order_by(runs_table.c.logical_date, table.c.run_id, table.c.task_id))
    if start is not None:
        query = query.where(runs_table.c.logical_date >= start)
    if end is not None:
        query = query.where(runs_table.c.logical_date <= end)
    return _page(engine, query, limit, 0)


def commands(engine: Engine, request_id: str) -> list[Row]:
    """The commands appended with ``request_id`` (one, unless it was reused for another DAG), oldest first."""
    table = LIVE["command"]
    query = select(table).where(table.c.request_id == request_id).order_by(table.c.at, table.c.dag_id)
    return _page(engine, query, 100, 0)


def backfills(engine: Engine, dag_id: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """The DAG's backfills, newest first, each with its progress."""
    table = LIVE["backfill"]
    query = select(table).where(table.c.dag_id == dag_id).order_by(table.c.requested_at.desc(),
                                                                  table.c.backfill_id)
    return [_with_progress(engine, row) for row in _page(engine, query, limit, offset)]


def backfill(engine: Engine, dag_id: str, backfill_id: str) -> Row | None:
    """One backfill with its progress: ``created`` / ``finished`` of its ``planned`` runs."""
    table = LIVE["backfill"]
    row = _one(engine, select(table).where(table.c.dag_id == dag_id, table.c.backfill_id == backfill_id))
    return None if row is None else _with_progress(engine, row)


def _with_progress(engine: Engine, row: Row) -> Row:
    # A backfill's runs are the DAG's runs of its planned logical dates that were created or
    # reopened once it was planned (a date's earlier run, ended before, is not this backfill's).
    if not row["logical_dates"] or row["planned_at"] is None:
        return {**row, "created": 0, "finished": 0}
    table = LIVE["dag_run"]
    touched = or_(table.c.created_at >= row["planned_at"], table.c.reopened_at >= row["planned_at"])
    ended = func.sum(case((table.c.state.in_(("success", "failed")), 1), else_=0))
    query = (select(func.count(), ended).where(table.c.dag_id == row["dag_id"],
                                               table.c.logical_date.in_(row["logical_dates"]),
                                               touched))
    with engine.connect() as connection:
        created, finished = connection.execute(query).one()
    return {**row, "created": created, "finished": finished or 0}


def import_errors(engine: Engine, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    table = LIVE["import_error"]
    return _page(engine, select(table).order_by(table.c.file_path), limit, offset)


_POOL_COLUMNS = ("pool", "slots", "description", "occupied_slots", "granted_tries", "waiting_tries", "waiting_slots",
                 "updated_at")


def pools(engine: Engine, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """The pools that exist (not deleted), by name, each with its open slots."""
    table = LIVE["pool"]
    query = select(*(table.c[name] for name in _POOL_COLUMNS)).where(table.c.slots.is_not(None))
    return [_with_open_slots(row) for row in _page(engine, query.order_by(table.c.pool), limit, offset)]


def pool(engine: Engine, name: str) -> Row | None:
    """A pool that exists, with its open slots (None: none of that name, or deleted)."""
    table = LIVE["pool"]
    found = _one(engine, select(*(table.c[column] for column in _POOL_COLUMNS))
                 .where(table.c.pool == name, table.c.slots.is_not(None)))
    return None if found is None else _with_open_slots(found)


def _with_open_slots(row: Row) -> Row:
    return {**row, "open_slots": max(row["slots"] - row["occupied_slots"], 0)}


# --- assets ------------------------------------------------------------------------------


def assets(engine: Engine, *, search: str | None = None, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """Assets by uri: those a DAG's definition names and those only events updated (``search``: a part of
    the uri or the name, in any case), each with its producing tasks (:func:`with_producers`)."""
    table = LIVE["asset"]
    query = select(table).order_by(table.c.uri)
    if search:
        part = search.lower()
        query = query.where(or_(func.lower(table.c.uri).contains(part, autoescape=True),
                                func.lower(table.c.name).contains(part, autoescape=True)))
    return with_producers(engine, _page(engine, query, limit, offset))


def asset(engine: Engine, uri: str) -> Row | None:
    """One asset with its producing tasks, or None."""
    table = LIVE["asset"]
    found = _one(engine, select(table).where(table.c.uri == uri))
    return None if found is None else with_producers(engine, [found])[0]


def with_producers(engine: Engine, rows: list[Row]) -> list[Row]:
    """Asset rows with ``producing_tasks`` ({dag_id, task_id}, by DAG then task) and ``defined_by`` (DAG ids)
    as the DAGs' current definitions say, instead of their ``references``: a reference counts while its DAG
    is active and its definition the one the reference was folded from (projections/asset.py)."""
    table = LIVE["dag"]
    dag_ids = sorted({dag_id for row in rows for dag_id in row["references"]})
    query = select(table.c.dag_id, table.c.fingerprint).where(table.c.dag_id.in_(dag_ids), table.c.is_active)
    with engine.connect() as connection:
        current = {dag_id: fingerprint for dag_id, fingerprint in connection.execute(query)} if dag_ids else {}
    return [_produced(row, current) for row in rows]


def _produced(row: Row, current: dict[str, str]) -> Row:
    live = {dag_id: reference for dag_id, reference in sorted(row["references"].items())
            if current.get(dag_id) == reference["fingerprint"]}
    tasks = [{"dag_id": dag_id, "task_id": task_id} for dag_id, reference in live.items()
             for task_id in reference["tasks"]]
    listed = {name: value for name, value in row.items() if name != "references"}
    return {**listed, "producing_tasks": tasks, "defined_by": list(live)}


def asset_events(engine: Engine, *, uri: str | None = None, source_dag_id: str | None = None,
                 limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """Asset events (of one asset, or produced by one DAG), newest first by when they happened, each with
    the runs that consumed it."""
    table = LIVE["asset_event"]
    query = select(table).order_by(table.c.timestamp.desc(), table.c.uri, table.c.event_id)
    if uri is not None:
        query = query.where(table.c.uri == uri)
    if source_dag_id is not None:
        query = query.where(table.c.source_dag_id == source_dag_id)
    return _page(engine, query, limit, offset)


def asset_events_with_id(engine: Engine, event_id: str) -> list[Row]:
    """The events with this id (one, unless the id was reused for another asset)."""
    table = LIVE["asset_event"]
    return _page(engine, select(table).where(table.c.event_id == event_id).order_by(table.c.uri), 100, 0)


def latest_asset_events(engine: Engine, uris: list[str], per_asset: int) -> dict[str, list[Row]]:
    """The newest ``per_asset`` events of each of these assets (the web UI's asset list), in one query."""
    table = LIVE["asset_event"]
    newest = func.row_number().over(partition_by=table.c.uri,
                                    order_by=(table.c.timestamp.desc(), table.c.event_id)).label("newest")
    ranked = select(table, newest).where(table.c.uri.in_(uris)).subquery()
    query = select(ranked).where(ranked.c.newest <= per_asset).order_by(ranked.c.uri, ranked.c.newest)
    found: dict[str, list[Row]] = {uri: [] for uri in uris}
    for row in _page(engine, query, 1_000_000, 0) if uris else []:
        found[row["uri"]].append(row)
    return found


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


# --- accounts ----------------------------------------------------------------------------


def user(engine: Engine, username: str) -> Row | None:
    """The account ``username`` (with its password hash), or None."""
    table = LIVE["tock_user"]
    return _one(engine, select(table).where(table.c.username == username))


def users(engine: Engine, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """Accounts by name, without their password hashes (nor the log positions of their incarnations)."""
    table = LIVE["tock_user"]
    columns = [column for column in table.c if column.name not in ("password_hash", *_INCARNATION)]
    return _page(engine, select(*columns).order_by(table.c.username), limit, offset)


def token_owner(engine: Engine, token_id: str) -> Row | None:
    """A live token (not revoked, created in its owner's current incarnation) with its owner's role, or None.
    Both events are keyed by the user name, so they are in one partition, where the token's TokenCreated
    follows the UserCreated that began the incarnation it belongs to."""
    tokens, accounts = LIVE["api_token"], LIVE["tock_user"]
    same_incarnation = and_(accounts.c.username == tokens.c.username,
                            accounts.c.created_partition == tokens.c.created_partition,
                            accounts.c.created_offset < tokens.c.created_offset)
    query = (select(tokens.c.token_id, tokens.c.token_hash, tokens.c.username, accounts.c.role)
             .join(accounts, same_incarnation)
             .where(tokens.c.token_id == token_id, tokens.c.revoked_at.is_(None)))
    return _one(engine, query)


_INCARNATION = ("created_partition", "created_offset")


def tokens(engine: Engine, *, username: str | None = None, limit: int = DEFAULT_LIMIT, offset: int = 0) -> list[Row]:
    """Tokens (never their hashes), newest first."""
    table = LIVE["api_token"]
    query = select(*[column for column in table.c if column.name != "token_hash"]).order_by(table.c.created_at.desc())
    if username is not None:
        query = query.where(table.c.username == username)
    return _page(engine, query, limit, offset)


def instances_of_runs(engine: Engine, dag_id: str, run_ids: list[str]) -> list[Row]:
    """Every task instance of these runs of the DAG (the web UI's grid), in one query."""
    # Plain tuples zipped into dicts: a 100 x 200 grid is 20,000 rows, and mapping each through
    # _decoded cost more than the query.
    table = LIVE["task_instance"]
    names = ("run_id", "task_id", "state", "try_number", "map_index")
    query = select(*(table.c[name] for name in names)).where(table.c.dag_id == dag_id, table.c.run_id.in_(run_ids))
    if not run_ids:
        return []
    with engine.connect() as connection:
        return [dict(zip(names, row, strict=False)) for row in connection.execute(query)]


def latest_runs(engine: Engine, dag_ids: list[str], per_dag: int) -> dict[str, list[Row]]:
    """The newest ``per_dag`` runs of each of these DAGs (the web UI's DAG list), newest first, in one query."""
    table = LIVE["dag_run"]
    newest = func.row_number().over(partition_by=table.c.dag_id,
                                    order_by=(table.c.created_at.desc(), table.c.run_id)).label("newest")
    ranked = select(table.c.dag_id, table.c.run_id, table.c.state, table.c.created_at, newest).where(
        table.c.dag_id.in_(dag_ids)).subquery()
    query = select(ranked).where(ranked.c.newest <= per_dag).order_by(ranked.c.dag_id, ranked.c.newest)
    found: dict[str, list[Row]] = {dag_id: [] for dag_id in dag_ids}
    for row in _page(engine, query, 1_000_000, 0) if dag_ids else []:
        found[row["dag_id"]].append(row)
    return found


def latest_scheduled_dates(engine: Engine) -> dict[str, float]:
    """Per DAG, the logical date of its latest scheduled run (where its schedule goes on from)."""
    table = LIVE["dag_run"]
    query = (select(table.c.dag_id, func.max(table.c.logical_date)).where(table.c.run_type == "scheduled")
             .group_by(table.c.dag_id))
    with engine.connect() as connection:
        return {dag_id: latest for dag_id, latest in connection.execute(query)}
