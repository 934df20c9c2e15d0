"""The grid's cells as HTML, built here rather than in the template (pure).

A grid of 100 runs x 200 tasks has 20,000 cells; through Jinja's expressions, escapes and
``urlencode`` filters per cell it took half a second to render. Here each run's link prefix
and each task's escaped and quoted id are computed once, and a cell is one f-string.
"""

from __future__ import annotations

from html import escape
from typing import Any

from markupsafe import Markup

from services.api.core.views import quote


def row_cells(row: dict[str, Any], columns: list[dict[str, Any]]) -> Markup:
    """The ``<td>`` cells of one task's row: a link per run to the task instance, its state's
    colour (class) and symbol, the try as a subscript from the second try on.

    A cell's accessible name names its task and run too, for keyboard users tabbing through
    links (leaving them to the headers made the HTML a third smaller but loaded no faster:
    chromium's time goes to the 20,000 elements, not the bytes).
    """
    task_id = escape(row["task_id"])
    task_href = escape(quote(row["task_id"]))
    runs = [(escape(column["run_id"]), escape(column["href"]) + task_href) for column in columns]
    cells = zip(row["cells"], runs, strict=False)
    return Markup("".join(_cell(cell, task_id, run_id, href) for cell, (run_id, href) in cells))


def _cell(cell: dict[str, Any], task_id: str, run_id: str, href: str) -> str:
    tried, mapped = cell["try_number"], cell.get("mapped")
    state = escape(cell["state"])
    label = f"{task_id} in {run_id}: {state}" + (f", try {tried}" if tried else "")
    sub = f"<sub>{tried}</sub>" if tried and tried > 1 else ""
    if mapped:  # a mapped task: its instances as a whole, and how many (its page lists them)
        label, sub = f"{label}, {mapped} mapped instances", f"<sub>[{mapped}]</sub>"
    return (f'<td><a class="cell {cell["css"]}" data-task="{task_id}" data-state="{state}" href="{href}" '
            f'aria-label="{label}">{cell["symbol"]}{sub}</a></td>')


def group_cells(row: dict[str, Any], columns: list[dict[str, Any]]) -> Markup:
    """The ``<td>`` cells of a task group's row: in each run, its tasks' state as the group shows it
    (services/api/core/groups.py), in colour and symbol; not a link (a group has no task page)."""
    group_id = escape(row["group_id"])
    cells = zip(row["cells"], columns, strict=False)
    return Markup("".join(
        f'<td><span class="cell {cell["css"]}" data-group="{group_id}" data-state="{escape(cell["state"])}" '
        f'aria-label="task group {group_id} in {escape(column["run_id"])}: {escape(cell["state"])}">'
        f'{cell["symbol"]}</span></td>' for cell, column in cells))
