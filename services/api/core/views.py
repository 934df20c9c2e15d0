"""What the pages show, as plain values: states with colour and symbol, the grid, runs, files, liveness."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote as url_quote

from schemas.decisions_view import DECIDING, described_decision
from schemas.values_view import described_values
from services.api.core.groups import TreeRow, group_state, tree_rows

# state -> (symbol, css class). Colour is never the only cue: each state has its symbol.
STATES = {
    "success": ("✓", "success"), "failed": ("✗", "failed"), "running": ("▶", "running"),
    "queued": ("◷", "queued"), "scheduled": ("◷", "queued"), "up_for_retry": ("↻", "retry"),
    "upstream_failed": ("⊘", "upstream-failed"), "skipped": ("⤼", "skipped"), "removed": ("—", "removed"),
    "dead": ("☠", "failed"), "killed": ("⨯", "failed"), "cleared": ("○", "queued"),
    "up_for_reschedule": ("⧗", "reschedule"),  # a sensor between pokes: waiting, holding nothing
    "deferred": ("⧖", "reschedule"),  # waiting on another DAG or a moment, with no try: holding nothing
}
NO_STATE = ("·", "none")


def state_look(state: str | None) -> dict[str, str]:
    symbol, css = STATES.get(state or "", NO_STATE)
    return {"state": state or "no state", "symbol": symbol, "css": css}


LIVENESS = {"alive": ("♥", "success"), "dead": ("☠", "failed"), "stopped": ("■", "removed")}
PARSE = {"ok": ("✓", "success"), "failed": ("✗", "failed")}


def liveness_look(state: str | None) -> dict[str, str]:
    """A scheduler's or worker's liveness: alive, dead (silent too long) or stopped."""
    symbol, css = LIVENESS.get(state or "", NO_STATE)
    return {"state": state or "unknown", "symbol": symbol, "css": css}


def parse_look(state: str | None) -> dict[str, str]:
    symbol, css = PARSE.get(state or "", NO_STATE)
    return {"state": state or "not parsed", "symbol": symbol, "css": css}


def grid(tasks: list[dict[str, Any]], runs: list[dict[str, Any]], instances: list[dict[str, Any]],
         dag_id: str = "", groups: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Runs as columns (oldest first), tasks as rows, each cell the instance's state look and try; a task
    group is a row of its own above its tasks (``kind`` "group"), each cell its tasks' state in that run
    (services/api/core/groups.py), its rows carrying the groups they are in (``ancestors``) to collapse.

    Each column carries the start of its cells' links (the DAG's and run's ids quoted once, not per cell).
    """
    by_key = cells_by_instance(instances)
    looks = {state: state_look(state) for state in {row["state"] for row in by_key.values()} | {None}}  # shared
    columns = [{"run_id": run["run_id"], "href": f"/dags/{quote(dag_id)}/runs/{quote(run['run_id'])}/tasks/",
                **state_look(run["state"])} for run in reversed(runs)]
    shapes = {task["task_id"]: task for task in tasks}
    rows = []
    for item in tree_rows(tasks, groups):
        if item.kind == "group":
            rows.append({**_tree_fields(item), "group_id": item.node_id, "tooltip": item.tooltip,
                         "count": len(item.members), "cells": _group_cells(item, columns, by_key, looks)})
            continue
        cells = []
        for column in columns:
            instance = by_key.get((column["run_id"], item.node_id), {})
            cells.append({"run_id": column["run_id"], "try_number": instance.get("try_number"),
                          "mapped": instance.get("mapped"), **looks[instance.get("state")]})
        rows.append({**_tree_fields(item), "task_id": item.node_id, **task_marks(shapes[item.node_id]),
                     "cells": cells})
    return {"columns": columns, "rows": rows, "grouped": bool(groups)}


def cells_by_instance(instances: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(run, task) -> what its cell shows: the task instance's row, or for a mapped task its instances'
    state as a whole (as a group shows its tasks') and how many there are (``mapped``); a mapped task with
    no instance (not expanded yet, expanded to none, or unmappable) shows its whole's row."""
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    mapped: dict[tuple[str, str], list[str | None]] = {}
    for row in instances:
        key = (row["run_id"], row["task_id"])
        index = row.get("map_index")
        if index is not None and index >= 0:
            mapped.setdefault(key, []).append(row["state"])
        else:
            by_key[key] = row
    for key, states in mapped.items():
        by_key[key] = {"state": group_state(states), "try_number": None, "mapped": len(states)}
    return by_key


def _tree_fields(item: TreeRow) -> dict[str, Any]:
    return {"kind": item.kind, "label": item.label, "ancestors": list(item.ancestors), "depth": item.depth}


def _group_cells(item: TreeRow, columns: list[dict[str, Any]], by_key: Mapping[tuple[str, str], dict[str, Any]],
                 looks: Mapping[str | None, dict[str, str]]) -> list[dict[str, Any]]:
    cells = []
    for column in columns:
        state = group_state(by_key.get((column["run_id"], task_id), {}).get("state") for task_id in item.members)
        cells.append({"run_id": column["run_id"], **(looks.get(state) or state_look(state))})
    return cells


def task_marks(task: Mapping[str, Any]) -> dict[str, Any]:
    """Whether a task is a setup or a teardown, and how the UI marks it (Airflow's arrows: up, down)."""
    setup, teardown = bool(task.get("is_setup")), bool(task.get("is_teardown"))
    return {"is_setup": setup, "is_teardown": teardown,
            "mark": "↥" if setup else "↧" if teardown else "",
            "mark_label": "setup task" if setup else "teardown task" if teardown else ""}


def quote(text: str) -> str:
    """A path segment quoted as Jinja's ``urlencode`` filter does (``/`` kept)."""
    return url_quote(text, safe="/")


def timeline(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task instance's events, heartbeats folded into one line per run of them."""
    items: list[dict[str, Any]] = []
    for event in history:
        kind = event["event_type"]
        if kind == "TaskHeartbeat" and items and items[-1]["event_type"] == "TaskHeartbeat":
            items[-1] = {**items[-1], "count": items[-1]["count"] + 1, "last_at": event["at"]}
            continue
        payload = event.get("payload") or {}
        details = secret_access(payload) if kind == "SecretAccessed" else _details(payload, kind in DECIDING)
        items.append({**event, "count": 1, "last_at": event["at"], "details": details,
                      "values": described_values(kind, payload), "why": described_decision(kind, payload)})
    return items


_QUIET = {"dag_id", "run_id", "task_id", "try_number", "at", "values_json", "inputs"}  # values: their own column
_SAID = {"reason", "trigger_rule", "upstream_states", "chosen_by", "follow", "scheduler_id"}  # a decision's: in "why"


def secret_access(payload: dict[str, Any]) -> str:
    """A SecretAccessed in a task's history: "variable region read (env)"."""
    return f"{payload.get('kind', '?')} {payload.get('name', '?')} read ({payload.get('backend', '?')})"


def _details(payload: dict[str, Any], decides: bool = False) -> str:
    quiet = _QUIET | _SAID if decides else _QUIET
    return ", ".join(f"{name}={value}" for name, value in sorted(payload.items())
                     if name not in quiet and value not in (None, "", [], {}))


def pretty_json(value: Any) -> str:
    """A JSON value (or JSON text) indented for reading; text that is not JSON as it is."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def duration(seconds: float | None) -> str:
    """A duration for people: "850 ms", "12.3 s", "4m 05s", "2h 03m"."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def run_rows(runs: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """The runs page's rows: state look, duration (so far, for an open run) and conf as JSON text."""
    return [{**run, "look": state_look(run["state"]), "conf_text": json.dumps(run.get("conf") or {}, sort_keys=True),
             "duration": duration(_elapsed(run, now)), "open": run["end_date"] is None} for run in runs]


def _elapsed(run: dict[str, Any], now: float) -> float | None:
    started = run.get("reopened_at") or run.get("created_at")
    if started is None:
        return None
    ended = float(run["end_date"]) if run["end_date"] is not None else now
    return max(ended - float(started), 0.0)


def dag_files(statuses: list[dict[str, Any]], errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per DAG file, by path: its last parse (state look, DAGs, duration) and its import error."""
    by_path = {row["file_path"]: {**row, "import_error": None} for row in statuses}
    for error in errors:
        row = by_path.setdefault(error["file_path"], {"file_path": error["file_path"], "state": "failed",
                                                      "dag_ids": [], "duration": None, "at": error["at"],
                                                      "error": error["error"]})
        row["import_error"] = error
    return [{**row, "look": parse_look(row["state"])} for _, row in sorted(by_path.items())]


NOT_RUN = frozenset({"skipped", "upstream_failed", "removed"})


def instance_why(instance: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the task page says of how the scheduler decided the instance: the reason it did not run, the
    trigger rule, the upstream states it read (each with its look), the branch that did not choose it,
    what a branch followed, its task group and whether it is a setup or a teardown. None: no instance."""
    if instance is None:
        return None
    state = instance.get("state")
    upstream = [{"task_id": task_id, **state_look(up)} for task_id, up in
                sorted((instance.get("upstream_states") or {}).items())]
    return {"title": "Why it did not run" if state in NOT_RUN else "Control flow",
            "reason": (instance.get("reason") or "") if state in NOT_RUN else "",
            "trigger_rule": instance.get("trigger_rule") or "", "upstream": upstream,
            "chosen_by": instance.get("chosen_by") or "", "follow": instance.get("follow"),
            "task_group": instance.get("task_group") or "", **task_marks(instance)}
