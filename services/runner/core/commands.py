"""The commands a try asked its runner to append before its success (tock/trigger_dagrun.py): pure, from
the try's report to the events, each keeping the request id the try derived (applied once by the owner)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemas import ClearTask, TriggerDagRun


def commands_of(outcome: Any, now: float) -> list[TriggerDagRun | ClearTask]:
    """The succeeded try's commands (none for any other outcome); a malformed one is left out."""
    if not outcome.succeeded:
        return []
    return [event for event in map(lambda item: _command(item, now), _items(outcome.commands)) if event is not None]


def _items(commands: Iterable[Any]) -> Iterable[dict[str, Any]]:
    return (item for item in commands if isinstance(item, dict))


def _command(item: dict[str, Any], now: float) -> TriggerDagRun | ClearTask | None:
    try:
        if item.get("command") == "TriggerDagRun":
            logical = item.get("logical_date")
            return TriggerDagRun(dag_id=str(item["dag_id"]), request_id=str(item["request_id"]),
                                 conf_json=str(item.get("conf_json") or "{}"),
                                 logical_date=None if logical is None else float(logical),
                                 requested_by="TriggerDagRunOperator", at=now)
        if item.get("command") == "ClearTask":
            return ClearTask(dag_id=str(item["dag_id"]), run_id=str(item["run_id"]), task_id="",
                             request_id=str(item["request_id"]), requested_by="TriggerDagRunOperator", at=now)
    except (KeyError, TypeError, ValueError):
        return None
    return None
