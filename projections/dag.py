"""Read model ``dag``: the latest definition of each DAG, whether it is gone, whether paused.

Definitions come from ``tock.dags``, removals from ``DagRemoved`` (``tock.parsing``) and
tombstones (``tock.dags``), pauses from ``PauseDag`` (``tock.events``). Topics are read
in no fixed order relative to each other, so each group of columns is folded only from
its own topic and ``is_active`` is derived from times, never from arrival order.
"""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json, logical_topic
from schemas import DAGS, DagDefinition, DagParsed, DagRemoved, PauseDag, TaskDefinition
from schemas import params as param_rules

TABLE = "dag"


def empty(dag_id: str) -> Row:
    return {"dag_id": dag_id, "file_path": None, "fingerprint": None, "schedule": None,
            "start_date": None, "timezone": "UTC", "end_date": None, "catchup": None, "max_active_runs": None,
            "deadline": None,
            "tags_json": "[]", "tasks_json": "[]", "params_json": "[]", "task_groups_json": "[]",
            "description": None, "dag_display_name": dag_id, "owners": "", "owner_links_json": "{}", "doc_md": None,
            "parsed_at": None, "removed_at": None,
            "is_active": False, "is_paused": False, "paused_at": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    if event is None:
        return (record.key,) if record.key and logical_topic(record.topic) == DAGS else None
    if isinstance(event, (DagParsed, DagRemoved, PauseDag)):
        return (event.dag_id,)
    return None


def evolve(row: Row | None, record: Record) -> Row:
    match record.event:
        case DagParsed() as event:
            row = _parsed(row or empty(event.dag_id), event)
        case DagRemoved() as event:
            row = _removed(row or empty(event.dag_id), event.at, event.file_path)
        case PauseDag() as event:
            row = {**(row or empty(event.dag_id)), "is_paused": event.paused, "paused_at": event.at}
        case None:
            row = _removed(row or empty(record.key), record.timestamp, None)
        case other:
            raise TypeError(f"dag read model cannot apply {type(other).__name__}")
    return {**row, "is_active": _active(row)}


def _parsed(row: Row, event: DagParsed) -> Row:
    definition = event.definition
    tasks = [{"task_id": task.task_id, "kind": task.kind, "upstream": task.upstream,
              "executor": task.executor, "queue": task.queue, "retries": task.retries,
              "task_group": task.task_group, "trigger_rule": task.trigger_rule, "is_setup": task.is_setup,
              "is_teardown": task.is_teardown, "chooses": task.chooses, "mapped": task.mapped is not None,
              "owner": task.owner, **_docs(task)}
             for task in definition.tasks]
    groups = [{"group_id": group.group_id, "parent_id": group.parent_id, "tooltip": group.tooltip}
              for group in definition.task_groups]
    return {**row, "file_path": event.file_path, "fingerprint": event.fingerprint,
            "schedule": definition.schedule, "start_date": definition.start_date,
            "timezone": definition.timezone, "end_date": definition.end_date,
            "catchup": definition.catchup, "max_active_runs": definition.max_active_runs,
            "deadline": definition.deadline, "tags_json": as_json(definition.tags),
            "tasks_json": as_json(tasks), "task_groups_json": as_json(groups),
            "params_json": _params_json(definition.params_json), **_shown(definition),
            "parsed_at": max(event.at, row["parsed_at"] or event.at)}


def _shown(definition: DagDefinition) -> Row:
    """What the UI shows of the DAG: its description, display name (its dag_id unless it has one), its tasks'
    distinct owners (Airflow's Owner column: comma separated), its owners' links and its docs."""
    return {"description": definition.description,
            "dag_display_name": definition.dag_display_name or definition.dag_id,
            "owners": ", ".join(sorted({task.owner for task in definition.tasks})),
            "owner_links_json": as_json(definition.owner_links), "doc_md": definition.doc_md}


def _docs(task: TaskDefinition) -> Row:
    """A task's docs, only those it has (most have none: the row stays small)."""
    return {name: text for name, text in (("doc_md", task.doc_md), ("doc", task.doc)) if text is not None}


def _params_json(params_json: str) -> str:
    """The DAG's params in the array format whichever its definition used (schemas/params.py): what the
    API, the CLI and the trigger form check a conf against."""
    return param_rules.to_json(param_rules.specs(params_json))


def _removed(row: Row, at: float, file_path: str | None) -> Row:
    removed = {**row, "removed_at": max(at, row["removed_at"] or at)}
    if row["file_path"] is None and file_path is not None:
        removed["file_path"] = file_path
    return removed


def _active(row: Row) -> bool:
    # A DAG is active when its latest definition is newer than its latest removal.
    if row["parsed_at"] is None:
        return False
    return row["removed_at"] is None or row["parsed_at"] > row["removed_at"]
