"""A DAG's task groups as the grid and the graph show them (pure): the tree of groups and tasks in
display order, and a group's state in a run, read from its tasks' states.

A group's state is its most telling task's state, in Airflow's order: a failure first, then an upstream
failure, a retry, waiting, running, no state, and only when every task is done, success before skipped
before removed. So a collapsed group still says at a glance whether something in it went wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Most telling first; a state not listed ranks with "no state".
STATE_ORDER: tuple[str | None, ...] = ("failed", "dead", "killed", "upstream_failed", "up_for_retry", "queued",
                                       "scheduled", "cleared", "running", "up_for_reschedule", "deferred", None,
                                       "success", "skipped", "removed")
_RANK = {state: rank for rank, state in enumerate(STATE_ORDER)}


def group_state(states: Iterable[str | None]) -> str | None:
    """The state a group shows for these states of its tasks (None: no state, or no tasks)."""
    return min(states, key=lambda state: _RANK.get(state, _RANK[None]), default=None)


@dataclass(frozen=True)
class TreeRow:
    """One row of the tree: a task, or a group (``members``: every task in it, nested ones included).
    ``ancestors``: the groups it is in, outermost first (its depth is their number)."""

    kind: str  # "task" or "group"
    node_id: str
    label: str
    ancestors: tuple[str, ...]
    tooltip: str = ""
    members: tuple[str, ...] = ()

    @property
    def depth(self) -> int:
        return len(self.ancestors)


def ancestors_of(tasks: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Task id -> the groups it is in, outermost first. A group the definition does not list counts as a
    group at the top; a parent chain that loops is cut where it repeats."""
    parents = {group["group_id"]: group.get("parent_id") or "" for group in groups}
    chains: dict[str, tuple[str, ...]] = {}
    for task in tasks:
        chain: list[str] = []
        group = task.get("task_group") or ""
        while group and group not in chain:
            chain.append(group)
            group = parents.get(group, "")
        chains[task["task_id"]] = tuple(reversed(chain))
    return chains


def tree_rows(tasks: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]]) -> list[TreeRow]:
    """Groups and tasks in display order: each group where its first task would be, its tasks and groups
    under it in definition order. A DAG without groups gives its tasks in definition order."""
    chains = ancestors_of(tasks, groups)
    first = _first_positions(tasks, chains)
    position = {task["task_id"]: index for index, task in enumerate(tasks)}

    def sort_key(task_id: str) -> list[tuple[int, str]]:
        return [(first[group], group) for group in chains[task_id]] + [(position[task_id], task_id)]

    members = _members(chains)
    tooltips = {group["group_id"]: group.get("tooltip") or "" for group in groups}
    rows: list[TreeRow] = []
    opened: set[str] = set()
    for task_id in sorted(chains, key=sort_key):
        chain = chains[task_id]
        for depth, group in enumerate(chain):
            if group not in opened:
                opened.add(group)
                rows.append(TreeRow("group", group, short_label(group, chain[depth - 1] if depth else ""),
                                    chain[:depth], tooltips.get(group, ""), tuple(members[group])))
        rows.append(TreeRow("task", task_id, short_label(task_id, chain[-1] if chain else ""), chain))
    return rows


def short_label(node_id: str, parent: str) -> str:
    """``dedupe`` for ``crm.clean.dedupe`` in ``crm.clean``: its id without its group's prefix."""
    prefix = parent + "."
    return node_id[len(prefix):] if parent and node_id.startswith(prefix) and len(node_id) > len(prefix) else node_id


def _first_positions(tasks: Sequence[Mapping[str, Any]], chains: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    first: dict[str, int] = {}
    for index, task in enumerate(tasks):
        for group in chains[task["task_id"]]:
            first.setdefault(group, index)
    return first


def _members(chains: Mapping[str, tuple[str, ...]]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {}
    for task_id, chain in chains.items():
        for group in chain:
            members.setdefault(group, []).append(task_id)
    return members
