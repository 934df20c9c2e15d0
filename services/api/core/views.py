"""What the pages show, as plain values: states with colour and symbol, the grid, runs, files, liveness."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote as url_quote

from schemas.values_view import described_values
from services.api.core.graph import Layout, label

# state -> (symbol, css class). Colour is never the only cue: each state has its symbol.
STATES = {
    "success": ("✓", "success"), "failed": ("✗", "failed"), "running": ("▶", "running"),
    "queued": ("◷", "queued"), "scheduled": ("◷", "queued"), "up_for_retry": ("↻", "retry"),
    "upstream_failed": ("⊘", "upstream-failed"), "skipped": ("⤼", "skipped"), "removed": ("—", "removed"),
    "dead": ("☠", "failed"), "killed": ("⨯", "failed"), "cleared": ("○", "queued"),
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
         dag_id: str = "") -> dict[str, Any]:
    """Runs as columns (oldest first), tasks as rows, each cell the instance's state look and try.

    Each column carries the start of its cells' links (the DAG's and run's ids quoted once, not per cell).
    """
    by_key = {(row["run_id"], row["task_id"]): row for row in instances}
    looks = {state: state_look(state) for state in {row["state"] for row in instances} | {None}}  # a dozen, shared
    columns = [{"run_id": run["run_id"], "href": f"/dags/{quote(dag_id)}/runs/{quote(run['run_id'])}/tasks/",
                **state_look(run["state"])} for run in reversed(runs)]
    rows = []
    for task in tasks:
        cells = []
        for column in columns:
            instance = by_key.get((column["run_id"], task["task_id"]), {})
            cells.append({"run_id": column["run_id"], "try_number": instance.get("try_number"),
                          **looks[instance.get("state")]})
        rows.append({"task_id": task["task_id"], "cells": cells})
    return {"columns": columns, "rows": rows}


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
        items.append({**event, "count": 1, "last_at": event["at"], "details": _details(payload),
                      "values": described_values(kind, payload)})
    return items


_QUIET = {"dag_id", "run_id", "task_id", "try_number", "at", "values_json", "inputs"}  # values: their own column


def _details(payload: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(payload.items())
                     if name not in _QUIET and value not in (None, "", [], {}))


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


def graph_nodes(result: Layout, states: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The graph's boxes with the state look (and try) of each task in the latest run."""
    nodes = []
    for box in result.boxes:
        instance = states.get(box.task_id, {})
        nodes.append({"box": box, "label": label(box.task_id), "try_number": instance.get("try_number"),
                      **state_look(instance.get("state"))})
    return nodes
