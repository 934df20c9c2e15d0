"""What the pages show, as plain values: states with colour and symbol, the grid's rows and columns."""

from __future__ import annotations

from typing import Any

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


def grid(tasks: list[dict[str, Any]], runs: list[dict[str, Any]], instances: list[dict[str, Any]]) -> dict:
    """Runs as columns (oldest first), tasks as rows, each cell the instance's state look and try."""
    by_key = {(row["run_id"], row["task_id"]): row for row in instances}
    columns = [{"run_id": run["run_id"], **state_look(run["state"])} for run in reversed(runs)]
    rows = []
    for task in tasks:
        cells = []
        for column in columns:
            instance = by_key.get((column["run_id"], task["task_id"]), {})
            cells.append({"run_id": column["run_id"], "try_number": instance.get("try_number"),
                          **state_look(instance.get("state"))})
        rows.append({"task_id": task["task_id"], "cells": cells})
    return {"columns": columns, "rows": rows}


def timeline(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task instance's events, heartbeats folded into one line per run of them."""
    items: list[dict[str, Any]] = []
    for event in history:
        kind = event["event_type"]
        if kind == "TaskHeartbeat" and items and items[-1]["event_type"] == "TaskHeartbeat":
            items[-1] = {**items[-1], "count": items[-1]["count"] + 1, "last_at": event["at"]}
            continue
        items.append({**event, "count": 1, "last_at": event["at"], "details": _details(event.get("payload") or {})})
    return items


_QUIET = {"dag_id", "run_id", "task_id", "try_number", "at"}


def _details(payload: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(payload.items())
                     if name not in _QUIET and value not in (None, "", [], {}))
