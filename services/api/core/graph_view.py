"""What the Graph tab shows of a grouped layout (pure): each box's state look in the latest run (a
collapsed group's read from its tasks, services/api/core/groups.py), its label and setup/teardown mark,
and for each group the query string that toggles it (``?collapsed=a,b``), so a toggle is a plain link
the page's script turns into a swap of the graph in place."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from services.api.core.graph import Edge, label
from services.api.core.group_graph import GroupedLayout
from services.api.core.groups import group_state, short_label, tree_rows
from services.api.core.views import state_look, task_marks


def collapsed_groups(text: str, known: Iterable[str]) -> frozenset[str]:
    """The groups a ``collapsed`` query parameter names (comma-separated) that the DAG has."""
    wanted = {part.strip() for part in text.split(",")}
    return frozenset(group for group in known if group in wanted)


def toggled(collapsed: Collection[str], group_id: str) -> str:
    """The query string of the graph with ``group_id`` toggled ("" when nothing stays collapsed)."""
    after = set(collapsed) ^ {group_id}
    return "?collapsed=" + quote(",".join(sorted(after)), safe=",") if after else ""


def graph_view(result: GroupedLayout, tasks: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]],
               states: Mapping[str, Mapping[str, Any]], collapsed: Collection[str]) -> dict[str, Any]:
    """The boxes (with state look, label, mark, a group's task count and toggle) and frames (with name,
    tooltip, state look and toggle) of the graph."""
    rows = {row.node_id: row for row in tree_rows(tasks, groups) if row.kind == "group"}
    shapes = {task["task_id"]: task for task in tasks}

    def group_fields(group_id: str) -> dict[str, Any]:
        row = rows[group_id]
        state = group_state(states.get(task_id, {}).get("state") for task_id in row.members)
        return {"group_id": group_id, "count": len(row.members), "tooltip": row.tooltip,
                "name": short_label(group_id, row.ancestors[-1] if row.ancestors else ""),
                "toggle": toggled(collapsed, group_id), **state_look(state)}

    nodes = []
    for node in result.nodes:
        if node.kind == "group":
            fields = group_fields(node.node_id)
            nodes.append({"node": node, **fields, "label": label(f"▸ {fields['name']} ({fields['count']})")})
            continue
        instance = states.get(node.node_id, {})
        nodes.append({"node": node, "label": label(node.node_id), "try_number": instance.get("try_number"),
                      **task_marks(shapes.get(node.node_id, {})), **state_look(instance.get("state"))})
    frames = [{"frame": frame, **group_fields(frame.group_id)} for frame in result.frames]
    return {"nodes": nodes, "frames": frames, "edges": [{"edge": edge, "css": _edge_css(edge, shapes)}
                                                        for edge in result.edges]}


def _edge_css(edge: Edge, shapes: Mapping[str, Mapping[str, Any]]) -> str:
    """A setup's edge to its teardown is drawn dashed, as Airflow draws it."""
    setup = shapes.get(edge.upstream, {}).get("is_setup")
    return "setup-teardown" if setup and shapes.get(edge.downstream, {}).get("is_teardown") else ""
