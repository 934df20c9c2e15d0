"""A DAG's task graph laid out for an inline SVG (pure): layers left to right, a box per task.

Longest-path layering puts each task one layer after its latest upstream task, so every edge
points right. Within a layer, tasks are ordered by the mean position of their upstream tasks
(one barycentre sweep), which keeps most edges short and straight without a crossing solver;
everything is linear in tasks + edges, so a DAG of thousands of tasks lays out in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Geometry:
    """Sizes in SVG pixels."""

    box_width: int = 180
    box_height: int = 28
    layer_gap: int = 56  # horizontal space between layers, for the edges
    row_gap: int = 10
    margin: int = 8


@dataclass(frozen=True)
class Box:
    task_id: str
    layer: int
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class Edge:
    upstream: str
    downstream: str
    path: str  # SVG path data, from the upstream box's right edge to the downstream box's left edge


@dataclass(frozen=True)
class Layout:
    boxes: list[Box]
    edges: list[Edge]
    width: int
    height: int


class CyclicGraph(ValueError):
    """The tasks' upstream lists form a cycle (a DAG file should never get that far)."""


def upstream_of(tasks: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Task id -> its upstream task ids, keeping only ids the DAG defines, in definition order."""
    listed = [task["task_id"] for task in tasks]
    known = set(listed)
    return {task["task_id"]: [up for up in dict.fromkeys(task.get("upstream") or []) if up in known]
            for task in tasks}


def layers(upstream: Mapping[str, list[str]]) -> dict[str, int]:
    """Longest-path layer of each task: 0 without upstream tasks, else 1 + its upstream tasks' highest."""
    downstream: dict[str, list[str]] = {task_id: [] for task_id in upstream}
    waiting = {task_id: len(ups) for task_id, ups in upstream.items()}
    for task_id, ups in upstream.items():
        for up in ups:
            downstream[up].append(task_id)
    layer = {task_id: 0 for task_id, count in waiting.items() if count == 0}
    ready = list(layer)
    while ready:
        task_id = ready.pop()
        for down in downstream[task_id]:
            layer[down] = max(layer.get(down, 0), layer[task_id] + 1)
            waiting[down] -= 1
            if waiting[down] == 0:
                ready.append(down)
    if len(layer) < len(upstream):
        stuck = sorted(task_id for task_id in upstream if task_id not in layer)
        raise CyclicGraph(f"the tasks' dependencies form a cycle through {', '.join(stuck[:5])}")
    return layer


def ordered_layers(upstream: Mapping[str, list[str]], layer: Mapping[str, int]) -> list[list[str]]:
    """Tasks per layer; a layer after the first sorted by the mean row of its upstream tasks."""
    columns: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for task_id in upstream:  # definition order is the tie-breaker
        columns[layer[task_id]].append(task_id)
    row: dict[str, float] = {task_id: index for index, task_id in enumerate(columns[0] if columns else [])}
    for column in columns[1:]:
        column.sort(key=lambda task_id: _mean(row[up] for up in upstream[task_id]))
        row.update({task_id: index for index, task_id in enumerate(column)})
    return columns


def _mean(values: Iterable[float]) -> float:
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


def layout(tasks: list[Mapping[str, Any]], geometry: Geometry = Geometry()) -> Layout:
    """Boxes and edges of the DAG's tasks (``task_id``, ``upstream``), laid out left to right."""
    upstream = upstream_of(tasks)
    columns = ordered_layers(upstream, layers(upstream))
    boxes = {box.task_id: box for index, column in enumerate(columns) for box in _column(index, column, geometry)}
    edges = [Edge(up, task_id, _path(boxes[up], boxes[task_id])) for task_id, ups in upstream.items() for up in ups]
    step = geometry.box_width + geometry.layer_gap
    tallest = max((len(column) for column in columns), default=0)
    width = 2 * geometry.margin + max(len(columns) * step - geometry.layer_gap, 0)
    height = 2 * geometry.margin + max(tallest * (geometry.box_height + geometry.row_gap) - geometry.row_gap, 0)
    return Layout(sorted(boxes.values(), key=lambda box: (box.layer, box.y)), edges, width, height)


def _column(index: int, column: list[str], geometry: Geometry) -> list[Box]:
    x = geometry.margin + index * (geometry.box_width + geometry.layer_gap)
    return [Box(task_id, index, x, geometry.margin + row * (geometry.box_height + geometry.row_gap),
                geometry.box_width, geometry.box_height) for row, task_id in enumerate(column)]


def _path(start: Box, end: Box) -> str:
    x1, y1 = start.x + start.width, start.y + start.height // 2
    x2, y2 = end.x, end.y + end.height // 2
    bend = (x2 - x1) // 2
    return f"M{x1} {y1} C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}"


def label(task_id: str, room: int = 22) -> str:
    """The task id shortened to fit its box (the full id is in the box's title)."""
    return task_id if len(task_id) <= room else task_id[:room - 1] + "…"
