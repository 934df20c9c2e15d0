"""The graph page's layout (pure): longest-path layers that respect every edge, boxes that never overlap."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.api.core import graph


def _tasks(edges: dict[str, list[str]]) -> list[dict]:
    return [{"task_id": task_id, "upstream": ups} for task_id, ups in edges.items()]


def _overlap(first: graph.Box, second: graph.Box) -> bool:
    return (first.x < second.x + second.width and second.x < first.x + first.width
            and first.y < second.y + second.height and second.y < first.y + first.height)


def _check(tasks: list[dict], result: graph.Layout) -> None:
    boxes = {box.task_id: box for box in result.boxes}
    assert set(boxes) == {task["task_id"] for task in tasks}
    for task in tasks:
        for up in task["upstream"]:
            assert boxes[up].layer < boxes[task["task_id"]].layer
            assert boxes[up].x + boxes[up].width < boxes[task["task_id"]].x  # edges point right
    by_place = sorted(result.boxes, key=lambda box: (box.x, box.y))
    for first, second in zip(by_place, by_place[1:], strict=False):
        assert not _overlap(first, second), (first, second)
    assert len({(box.x, box.y) for box in result.boxes}) == len(result.boxes)
    assert all(box.x + box.width <= result.width and box.y + box.height <= result.height for box in result.boxes)


def test_a_task_sits_one_layer_after_its_latest_upstream_task():
    upstream = {"extract": [], "clean": ["extract"], "load": ["clean", "extract"], "report": ["load"], "lone": []}
    assert graph.layers(upstream) == {"extract": 0, "clean": 1, "load": 2, "report": 3, "lone": 0}


def test_edges_become_paths_from_the_right_of_one_box_to_the_left_of_the_next():
    result = graph.layout(_tasks({"a": [], "b": ["a"]}))
    a, b = result.boxes
    assert [(edge.upstream, edge.downstream) for edge in result.edges] == [("a", "b")]
    assert result.edges[0].path.startswith(f"M{a.x + a.width} {a.y + a.height // 2} ")
    assert result.edges[0].path.endswith(f" {b.x} {b.y + b.height // 2}")


def test_unknown_and_repeated_upstream_ids_are_ignored():
    assert graph.upstream_of(_tasks({"a": [], "b": ["a", "a", "ghost"]})) == {"a": [], "b": ["a"]}


def test_a_cycle_is_refused_with_the_tasks_in_it():
    with pytest.raises(graph.CyclicGraph, match="a, b"):
        graph.layers({"a": ["b"], "b": ["a"], "c": []})


def test_a_layer_is_ordered_by_where_its_upstream_tasks_are():
    # Two chains defined interleaved: each child sits in the row of its parent.
    upstream = {"p1": [], "p2": [], "c2": ["p2"], "c1": ["p1"]}
    assert graph.ordered_layers(upstream, graph.layers(upstream)) == [["p1", "p2"], ["c1", "c2"]]


def test_an_empty_dag_has_an_empty_layout():
    result = graph.layout([])
    assert result.boxes == [] and result.edges == []


def _random_dag(size: int, seed: int) -> list[dict]:
    chooser = random.Random(seed)
    names = [f"task_{index}" for index in range(size)]
    return [{"task_id": name, "upstream": chooser.sample(names[:index], min(index, chooser.randint(0, 3)))}
            for index, name in enumerate(names)]


@settings(max_examples=60, deadline=None)
@given(size=st.integers(min_value=1, max_value=40), seed=st.integers(min_value=0, max_value=10_000))
def test_random_dags_have_edges_pointing_right_and_no_overlapping_boxes(size, seed):
    tasks = _random_dag(size, seed)
    _check(tasks, graph.layout(tasks))


def test_a_wide_fan_out_of_250_tasks_lays_out_quickly():
    tasks = _tasks({"start": [], **{f"t{index}": ["start"] for index in range(250)},
                    "end": [f"t{index}" for index in range(250)]})
    started = time.perf_counter()
    result = graph.layout(tasks)
    assert time.perf_counter() - started < 0.5
    _check(tasks, result)
    assert len(result.edges) == 500 and max(box.layer for box in result.boxes) == 2


def test_a_deep_random_dag_of_300_tasks_respects_every_edge():
    tasks = _random_dag(300, seed=7)
    _check(tasks, graph.layout(tasks))


def test_long_task_ids_are_shortened_for_their_box():
    assert graph.label("short") == "short"
    assert graph.label("x" * 40, room=10) == "x" * 9 + "…"
