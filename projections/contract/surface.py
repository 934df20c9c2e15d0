"""The public surface of the projection tables: which tables and columns integrators may query.

Each version is a tuple of :class:`PublicTable`: a live table (projections/tables.py), what one of its
rows is, and the columns offered with a one-line meaning each. Types are never written here: they are
read from the SQLAlchemy metadata (:func:`column_type`). Every table of the projections is either
offered or listed in :data:`LEFT_OUT` with the reason, so a new table is a decision, not an accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column

from projections.tables import LIVE

VIEW_PREFIX = "tock_v"


@dataclass(frozen=True)
class PublicTable:
    """One view of a version: ``table``'s ``columns`` (name -> meaning, in the view's order)."""

    table: str
    row: str  # what one row is
    columns: Mapping[str, str]


Shape = dict[str, dict[str, str]]  # view name -> column name -> SQL type, in the view's order


def view_name(version: int, table: str) -> str:
    return f"{VIEW_PREFIX}{version}_{table}"


def column_of(table: str, column: str) -> Column[Any]:
    """The live table's column; a KeyError names a declared column the table lacks."""
    if column not in LIVE[table].c:
        raise KeyError(f"the contract offers {table}.{column} but projections/tables.py declares no such column: "
                       "a published column stays in its table (a new shape is a new version)")
    return LIVE[table].c[column]


def column_type(table: str, column: str) -> str:
    """The column's SQL type as SQLAlchemy's metadata declares it (``VARCHAR``, ``FLOAT``, ...)."""
    return str(column_of(table, column).type)


def shape(version: int) -> Shape:
    """Each view of ``version`` with its columns and their SQL types, from the declaration and the metadata."""
    return {view_name(version, public.table): {name: column_type(public.table, name) for name in public.columns}
            for public in VERSIONS[version]}


_TIME = "seconds since the epoch (UTC)"

V1: tuple[PublicTable, ...] = (
    PublicTable("dag", "DAG id the DAG processor has parsed (its latest definition), or whose removal "
                       "or pause is in the log", {
        "dag_id": "The DAG's id.",
        "dag_display_name": "The name the UI shows: the DAG's dag_display_name, else its id.",
        "description": "The DAG's description, or NULL.",
        "doc_md": "The DAG's docs (Markdown), or NULL.",
        "file_path": "The DAG file that defines it (as the DAG processor saw it).",
        "owners": "Its tasks' distinct owners, sorted, comma separated.",
        "tags_json": "Its tags: a JSON array of strings.",
        "schedule": "Its schedule as written (a cron expression, a preset, ...), or NULL for none.",
        "timezone": "The time zone its schedule is read in (an IANA name).",
        "start_date": f"Its start date, {_TIME}, or NULL.",
        "end_date": f"Its end date, {_TIME}, or NULL.",
        "catchup": "Whether the scheduler creates the runs of missed intervals.",
        "max_active_runs": "At most this many runs of it run at once.",
        "is_active": "Whether its latest definition is newer than its latest removal (its file still defines it).",
        "is_paused": "Whether it is paused (no new scheduled runs, no new tries).",
        "paused_at": f"When it was last paused or unpaused, {_TIME}, or NULL.",
        "parsed_at": f"When its latest definition was parsed, {_TIME}, or NULL.",
        "removed_at": f"When it was last removed (its file or the DAG gone), {_TIME}, or NULL.",
    }),
    PublicTable("dag_run", "run of a DAG", {
        "dag_id": "The DAG's id.",
        "run_id": "The run's id, unique within its DAG.",
        "state": "running, success or failed.",
        "run_type": "scheduled, manual, backfill or asset_triggered.",
        "logical_date": f"The run's logical date, {_TIME}.",
        "conf_json": "The run's conf: a JSON object.",
        "created_at": f"When the run was created, {_TIME}.",
        "end_date": f"When it ended, {_TIME}; NULL while it runs.",
        "reason": "Why it ended so, when not by its tasks' outcome alone (e.g. its DAG was deleted), or NULL.",
        "reopened_at": f"When it last ran again after ending (some of its tasks cleared), {_TIME}, or NULL.",
        "deadline_missed_at": f"When it missed its DAG's deadline, {_TIME}, or NULL.",
    }),
    PublicTable("task_instance", "task instance of a run (one map index of a mapped task), as of its latest try",
                {
        "dag_id": "The DAG's id.",
        "run_id": "The run's id.",
        "task_id": "The task's id.",
        "map_index": "The instance's map index; -1 for an unmapped task, and for a mapped task as a whole.",
        "map_count": "On a mapped task's map_index -1 row: how many instances its expansion made; else NULL.",
        "state": "scheduled, queued, running, deferred, success, failed, skipped, upstream_failed, up_for_retry, "
                 "up_for_reschedule, cleared, removed, dead or killed; NULL before anything happened to it.",
        "try_number": "The latest try's number (1 for the first), or NULL before its first try.",
        "executor": "The executor the latest try was queued to.",
        "queue": "The queue the latest try was queued to.",
        "hostname": "The host the latest try runs or ran on.",
        "pid": "The latest try's process id on that host.",
        "queued_at": f"When the latest try was queued, {_TIME}.",
        "start_date": f"When the latest try started, {_TIME}.",
        "end_date": f"When the latest try ended, or the instance was marked, skipped or otherwise ended, {_TIME}.",
        "retry_not_before": f"Up for retry or reschedule: the next try not before this, {_TIME}.",
        "error": "The latest try's error, when it failed or was declared dead.",
        "reason": "Why it is in its state, when the state alone does not say (a skip, a kill, a pool wait, ...).",
        "trigger_rule": "Skipped or upstream_failed by its trigger rule: that rule; else NULL.",
        "marked_at": f"When an operator marked its state, {_TIME}, or NULL.",
        "marked_by": "Who marked its state, or NULL.",
        "cleared_at": f"When an operator cleared it (state cleared until its next try), {_TIME}, or NULL.",
        "kill_requested_at": f"When the latest try was asked to stop, {_TIME}, or NULL.",
        "last_heartbeat": f"The latest heartbeat of its runner, {_TIME}, or NULL.",
        "updated_at": f"When this row last changed in the log, {_TIME}.",
    }),
    PublicTable("task_event", "event of a task instance, in log order (its history; heartbeats excepted)", {
        "topic": "The log topic of the event (without the installation's topic prefix).",
        "partition": "Its partition.",
        "offset": "Its offset in that partition; per DAG, log order is offset order.",
        "dag_id": "The DAG's id.",
        "run_id": "The run's id.",
        "task_id": "The task's id (\"\" for a clear of a whole run).",
        "map_index": "The instance's map index, -1 when unmapped or about the task as a whole.",
        "try_number": "The try the event is about, or NULL for events about no try.",
        "event_type": "The event's type: TaskQueued, TaskStarted, TaskSucceeded, TaskFailed, ...",
        "at": f"When the event happened, {_TIME}.",
    }),
    PublicTable("backfill", "backfill of a DAG", {
        "dag_id": "The DAG's id.",
        "backfill_id": "The backfill's id: its request's id.",
        "state": "requested, running, success, failed, cancelled or rejected.",
        "start_date": f"The first logical date asked for, {_TIME}.",
        "end_date": f"The last logical date asked for, {_TIME}.",
        "reprocess_failed": "Whether failed runs in the range run again.",
        "conf_json": "The conf of its runs: a JSON object.",
        "logical_dates_json": f"The logical dates planned, a JSON array of {_TIME}, in order.",
        "planned": "How many runs were planned, or NULL before planning.",
        "requested_by": "Who asked for it.",
        "requested_at": f"When it was asked for, {_TIME}.",
        "planned_at": f"When the scheduler planned it, {_TIME}, or NULL.",
        "cancel_requested_at": f"When it was asked to stop, {_TIME}, or NULL.",
        "finished_at": f"When it ended (or was rejected), {_TIME}, or NULL.",
        "reason": "Why it was rejected, or NULL.",
    }),
    PublicTable("asset", "asset (by uri) a DAG names or an event updated", {
        "uri": "The asset's uri.",
        "name": "Its name.",
        "group": "Its group.",
        "extra_json": "Its extra: a JSON object.",
        "consuming_dags_json": "The DAGs scheduled on it: a JSON array of DAG ids, sorted.",
        "event_count": "How many events it has had (each counted once).",
        "last_event_at": f"Its latest event's timestamp, {_TIME}, or NULL.",
        "updated_at": f"When this row last changed in the log, {_TIME}.",
    }),
    PublicTable("asset_event", "event of an asset, counted once however often it was appended", {
        "uri": "The asset's uri.",
        "event_id": "The event's id within its asset.",
        "name": "The asset's name.",
        "group": "The asset's group.",
        "extra_json": "The event's extra: a JSON object.",
        "source_dag_id": "The DAG of the task that updated the asset (\"\" when not a task).",
        "source_run_id": "That task's run (\"\" when not a task).",
        "source_task_id": "That task (\"\" when not a task).",
        "source_map_index": "That task instance's map index (-1 when unmapped).",
        "source_alias": "The asset alias it was updated through, or \"\".",
        "requested_by": "Who appended it through the API, or NULL.",
        "timestamp": f"The event's timestamp, {_TIME}.",
        "recorded_at": f"When the asset's ledger recorded it, {_TIME}; NULL while only a run consuming it is read.",
        "consumed_by_json": "The runs it triggered: a JSON array of {\"dag_id\", \"run_id\"} objects.",
    }),
    PublicTable("pool", "pool and what holds its slots", {
        "pool": "The pool's name.",
        "slots": "Its size, or NULL once deleted.",
        "description": "Its description, or NULL.",
        "occupied_slots": "Slots held by tries granted them.",
        "granted_tries": "How many tries hold slots of it.",
        "waiting_tries": "How many tries wait for slots of it.",
        "waiting_slots": "How many slots those waiting tries ask for.",
        "updated_at": f"When this row last changed in the log, {_TIME}.",
        "deleted_at": f"When it was deleted, {_TIME}, or NULL.",
    }),
    PublicTable("parse_status", "file of the DAGs folder and its latest parse", {
        "file_path": "The file.",
        "state": "ok or failed.",
        "dag_ids_json": "The DAGs it defined: a JSON array of DAG ids ([] when it failed).",
        "duration": "How long the parse took, in seconds; NULL when it failed.",
        "error": "The parse error, when it failed.",
        "at": f"When it was parsed, {_TIME}.",
    }),
    PublicTable("import_error", "file whose latest parse failed, or a DAG the scheduler quarantined", {
        "file_path": "The file, or \"<file>#<dag_id>\" for a quarantined DAG.",
        "error": "What went wrong.",
        "traceback": "The error's traceback (\"\" for a quarantine).",
        "at": f"When it happened, {_TIME}.",
    }),
    PublicTable("scheduler", "scheduler instance", {
        "scheduler_id": "The instance's id.",
        "hostname": "Its host.",
        "pid": "Its process id there.",
        "state": "alive or stopped as its events say (a killed one stays alive here: compare last_heartbeat "
                 "with the session timeout to judge it dead).",
        "partitions_json": "The partitions it owns: a JSON array of numbers ([] once stopped).",
        "first_seen": f"Its first heartbeat, {_TIME}.",
        "last_heartbeat": f"Its latest heartbeat, {_TIME}.",
        "stopped_at": f"When it stopped cleanly, {_TIME}, or NULL.",
    }),
    PublicTable("executor_worker", "executor worker (by name)", {
        "worker": "The worker's name.",
        "executor": "The executor it serves.",
        "hostname": "Its host.",
        "pid": "Its process id there.",
        "queues_json": "The queues it serves: a JSON array, sorted.",
        "concurrency": "How many tries it runs at once.",
        "first_seen": f"Its first heartbeat, {_TIME}.",
        "last_heartbeat": f"Its latest heartbeat, {_TIME}.",
        "stopped_at": f"When it stopped cleanly, {_TIME}, or NULL (a later heartbeat clears it).",
    }),
)

VERSIONS: dict[int, tuple[PublicTable, ...]] = {1: V1}
CURRENT = max(VERSIONS)

# Tables of the projections that no view offers, and why.
LEFT_OUT: dict[str, str] = {
    "projection_offset": "the projector's bookkeeping (the next offset of each partition), not a fact of the "
                         "workflows; it changes with every batch",
    "tock_user": "accounts with their password hashes: not for every database reader",
    "api_token": "API tokens with their hashes: not for every database reader",
    "command": "the API's record of each operator command and its answer, with the command's own fields as "
               "the event schemas make them; its effects are in dag_run, task_instance and backfill",
}

# Columns of offered tables that no view offers, and why: each column of an offered table is offered or
# listed here (a unit test checks), so a new column is a decision too.
_HIDDEN = (
    ("dag.fingerprint dag_run.dag_fingerprint", "an internal identity of a parsed definition"),
    ("dag.tasks_json dag.task_groups_json dag.params_json dag.owner_links_json",
     "their inner shape follows the DAG definition's schema version; the API and the UI show them"),
    ("dag.deadline", "what it counts from is not in the table, so alone it misleads; a run's deadline_missed_at "
                     "says when one was missed"),
    ("dag_run.scheduler_id task_instance.scheduler_id task_instance.runner_id task_instance.handle",
     "which internal process acted: they change with restarts and takeovers"),
    ("task_instance.heartbeat_try task_instance.kill_try task_instance.kill_request_id",
     "the fold's own bookkeeping"),
    ("task_instance.values_json task_instance.rendered_json task_instance.upstream_states_json "
     "task_instance.follow_json task_instance.chosen_by",
     "encodings of values and decisions internal to Tock; the API and `tock tasks` show them"),
    ("task_event.payload_json", "the event's fields as its schema version writes them: read the log for those"),
    ("asset.references_json", "per-DAG entries that readers must filter by each DAG's current definition"),
    ("pool.grants_json pool.asks_json", "the ledger's keys; the counts beside them are the public figures"),
    ("parse_status.processor_id parse_status.file_hash import_error.processor_id import_error.file_hash",
     "which DAG processor parsed which content: internal"),
)
HIDDEN_COLUMNS: tuple[tuple[tuple[str, ...], str], ...] = tuple((tuple(columns.split()), reason)
                                                                for columns, reason in _HIDDEN)
