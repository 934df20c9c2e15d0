"""A DAG's graph with its task groups (pure): an expanded group is a frame around its tasks and groups, a
collapsed group one box standing for all of them, its edges those of its tasks.

Laid out level by level, inside out: a group's own tasks and groups are layered as graph.py layers a DAG,
then the group is placed as one block in its parent's layers, so its members sit together and every edge
still points right. A DAG without groups gets graph.py's layout unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.api.core.graph import Edge, Geometry, layers, layout, ordered_layers, upstream_of
from services.api.core.groups import ancestors_of, tree_rows

FRAME_PAD = 8  # around a frame's members
FRAME_HEAD = 24  # above them, for the group's name and its toggle
DEFAULT_GEOMETRY = Geometry()


@dataclass(frozen=True)
class Node:
    """A box: a task's (``kind`` "task"), or a collapsed group's ("group")."""

    node_id: str
    kind: str
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class Frame:
    """An expanded group's box around its members; ``depth``: how many groups it is in."""

    group_id: str
    depth: int
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class GroupedLayout:
    nodes: list[Node]
    frames: list[Frame]
    edges: list[Edge]
    width: int
    height: int


@dataclass
class _Tree:
    """What the layout works on: each container's children ("" the DAG), what each visible id is, the
    containers of each, and the edges between visible boxes."""

    children: dict[str, list[str]] = field(default_factory=lambda: {"": []})
    kind: dict[str, str] = field(default_factory=dict)  # "task", "group" (collapsed) or "frame"
    place: dict[str, tuple[str, ...]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)


def grouped_layout(tasks: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]],
                   collapsed: Collection[str] = (), geometry: Geometry = DEFAULT_GEOMETRY) -> GroupedLayout:
    """Boxes, frames and edges of the DAG's tasks (``task_id``, ``upstream``, ``task_group``) in their
    groups, those in ``collapsed`` drawn as one box. Raises graph.CyclicGraph when the tasks form a cycle,
    or when the groups do (a task outside a group between two of its tasks)."""
    if not groups:
        return _flat(tasks, geometry)
    tree = _tree(tasks, groups, collapsed)
    sizes: dict[str, tuple[int, int]] = {}
    offsets: dict[str, tuple[int, int]] = {}
    level_up = _level_edges(tree)
    width, height = _arrange("", tree, level_up, sizes, offsets, geometry)
    origin = (geometry.margin, geometry.margin)
    nodes, frames, corners = _placed(tree, sizes, offsets, origin, geometry)
    edges = [Edge(up, down, _path(corners[up], corners[down], geometry)) for up, down in tree.edges]
    return GroupedLayout(nodes, frames, edges, width + 2 * geometry.margin, height + 2 * geometry.margin)


def _flat(tasks: Sequence[Mapping[str, Any]], geometry: Geometry) -> GroupedLayout:
    result = layout(list(tasks), geometry)
    nodes = [Node(box.task_id, "task", box.x, box.y, box.width, box.height) for box in result.boxes]
    return GroupedLayout(nodes, [], result.edges, result.width, result.height)


def _tree(tasks: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]],
          collapsed: Collection[str]) -> _Tree:
    tree = _Tree()
    for row in tree_rows(tasks, groups):
        if any(group in collapsed for group in row.ancestors):
            continue  # inside a collapsed group: its box stands for it
        tree.children.setdefault(row.ancestors[-1] if row.ancestors else "", []).append(row.node_id)
        tree.place[row.node_id] = row.ancestors
        expanded = row.kind == "group" and row.node_id not in collapsed
        tree.kind[row.node_id] = "frame" if expanded else row.kind
        if expanded:
            tree.children.setdefault(row.node_id, [])
    chains = ancestors_of(tasks, groups)
    shown = {task_id: next((group for group in chain if group in collapsed), task_id)
             for task_id, chain in chains.items()}
    pairs = ((shown[up], shown[task_id]) for task_id, ups in upstream_of(tasks).items() for up in ups)
    tree.edges = list(dict.fromkeys(pair for pair in pairs if pair[0] != pair[1]))
    return tree


def _level_edges(tree: _Tree) -> dict[str, dict[str, list[str]]]:
    """Container -> child -> its upstream children there: each edge lifted to the innermost container
    holding both its ends, between the children of it that hold them."""
    level_up: dict[str, dict[str, list[str]]] = {}
    for up, down in tree.edges:
        up_path, down_path = (*tree.place[up], up), (*tree.place[down], down)
        shared = 0
        while up_path[shared] == down_path[shared]:
            shared += 1
        container = up_path[shared - 1] if shared else ""
        ups = level_up.setdefault(container, {}).setdefault(down_path[shared], [])
        if up_path[shared] not in ups:
            ups.append(up_path[shared])
    return level_up


def _arrange(container: str, tree: _Tree, level_up: Mapping[str, Mapping[str, list[str]]],
             sizes: dict[str, tuple[int, int]], offsets: dict[str, tuple[int, int]],
             geometry: Geometry) -> tuple[int, int]:
    """Lay out a container's children in layers (frames first, inside out); their offsets within it and
    its inner size."""
    items = tree.children.get(container, [])
    for item in items:
        if tree.kind[item] == "frame":
            inner_width, inner_height = _arrange(item, tree, level_up, sizes, offsets, geometry)
            sizes[item] = (inner_width + 2 * FRAME_PAD, inner_height + FRAME_HEAD + FRAME_PAD)
        else:
            sizes[item] = (geometry.box_width, geometry.box_height)
    ups = {item: level_up.get(container, {}).get(item, []) for item in items}
    x, height = 0, 0
    for column in ordered_layers(ups, layers(ups)):
        y = 0
        for item in column:
            offsets[item] = (x, y)
            y += sizes[item][1] + geometry.row_gap
        height = max(height, y - geometry.row_gap)
        x += max(sizes[item][0] for item in column) + geometry.layer_gap
    return max(x - geometry.layer_gap, 0), height


def _placed(tree: _Tree, sizes: Mapping[str, tuple[int, int]], offsets: Mapping[str, tuple[int, int]],
            origin: tuple[int, int], geometry: Geometry) -> tuple[list[Node], list[Frame], dict[str, Node]]:
    """Absolute boxes and frames, outer frames first; the box of each visible id by id."""
    nodes: list[Node] = []
    frames: list[Frame] = []
    pending = [("", origin)]
    while pending:
        container, (left, top) = pending.pop()
        for item in tree.children.get(container, []):
            x, y = left + offsets[item][0], top + offsets[item][1]
            width, height = sizes[item]
            if tree.kind[item] == "frame":
                frames.append(Frame(item, len(tree.place[item]), x, y, width, height))
                pending.append((item, (x + FRAME_PAD, y + FRAME_HEAD)))
            else:
                nodes.append(Node(item, tree.kind[item], x, y, width, height))
    frames.sort(key=lambda frame: frame.depth)
    nodes.sort(key=lambda node: (node.x, node.y))
    return nodes, frames, {node.node_id: node for node in nodes}


def _path(start: Node, end: Node, geometry: Geometry) -> str:
    x1, y1 = start.x + start.width, start.y + start.height // 2
    x2, y2 = end.x, end.y + end.height // 2
    bend = max((x2 - x1) // 2, geometry.layer_gap // 2)
    return f"M{x1} {y1} C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}"
