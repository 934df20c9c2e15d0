"""How a try's values and inputs read for people (``tock tasks history``, the API and the UI's task page).

A TaskSucceeded shows what the try passed on, key by key; a TaskQueued which upstream try's values
the try reads (its provenance). Long values are cut for display; the event keeps them whole.
"""

from __future__ import annotations

import json
from typing import Any

SHOWN_CHARACTERS = 200  # of one value, for display


def described_values(event_type: str, payload: dict[str, Any]) -> str:
    """The values (TaskSucceeded) or inputs (TaskQueued) of a history event, as text ("" none)."""
    if event_type == "TaskSucceeded":
        return values_text(str(payload.get("values_json") or ""))
    if event_type == "TaskQueued":
        return inputs_text(payload.get("inputs") or [])
    return ""


def values_text(values_json: str) -> str:
    """``key=value`` for each value a try passed on, each cut to SHOWN_CHARACTERS."""
    if not values_json:
        return ""
    return "; ".join(f"{key}={_cut(json.dumps(value, sort_keys=True))}"
                     for key, value in json.loads(values_json).items())


def inputs_text(inputs: list[dict[str, Any]]) -> str:
    """``reads task#try`` for each upstream try whose values a queued try reads."""
    if not inputs:
        return ""
    return "reads " + ", ".join(f"{item['task_id']}#{item['try_number']}" + (" (left out: too large)"
                                                                            if item.get("left_out") else "")
                                for item in inputs)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 1] + "…"
