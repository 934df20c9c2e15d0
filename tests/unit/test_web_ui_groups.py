"""Task groups in the grid and the graph (pure): the tree in display order, a group's state read from its
tasks', the nested graph layout (frames hold their members, edges point right, a collapsed group is one
box with its tasks' edges) and the toggles' query strings."""

from __future__ import annotations

import random

import pytest

from services.api.core import graph, graph_view, views
from services.api.core.group_graph import Frame, grouped_layout
from services.api.core.groups import group_state, tree_rows

GROUPS = [{"group_id": "crm", "parent_id": "", "tooltip": "Customer records"},
          {"group_id": "crm.clean", "parent_id": "crm"}]
TASKS = [{"task_id": "begin", "upstream": []},
         {"task_id": "crm.fetch", "upstream": ["begin"], "task_group": "crm"},
         {"task_id": "crm.clean.dedupe", "upstream": ["crm.fetch"], "task_group": "crm.clean"},
         {"task_id": "crm_loaded", "upstream": ["crm.clean.dedupe"]},
         {"task_id": "end", "upstream": ["crm_loaded", "begin"], "is_teardown": True}]


@pytest.mark.parametrize(("states", "shown"), [
    (["success", "failed", "running"], "failed"), (["success", "upstream_failed", "skipped"], "upstream_failed"),
    (["success", "running", None], "running"), (["success", None], None), (["success", "skipped"], "success"),
    (["skipped", "removed"], "skipped"), (["dead", "up_for_retry"], "dead"), ([], None)])
def test_a_group_shows_its_most_telling_tasks_state(states, shown):
    assert group_state(states) == shown


def test_the_tree_puts_each_group_where_its_first_task_is_with_short_labels():
    rows = [(row.kind, row.node_id, row.label, row.depth) for row in tree_rows(TASKS, GROUPS)]
    assert rows == [("task", "begin", "begin", 0), ("group", "crm", "crm", 0), ("task", "crm.fetch", "fetch", 1),
                    ("group", "crm.clean", "clean", 1), ("task", "crm.clean.dedupe", "dedupe", 2),
                    ("task", "crm_loaded", "crm_loaded", 0), ("task", "end", "end", 0)]
    crm = next(row for row in tree_rows(TASKS, GROUPS) if row.node_id == "crm")
    assert (crm.members, crm.tooltip) == (("crm.fetch", "crm.clean.dedupe"), "Customer records")


def test_a_groups_tasks_stay_together_whatever_their_definition_order():
    tasks = [{"task_id": "a", "task_group": "g"}, {"task_id": "b"}, {"task_id": "c", "task_group": "g"}]
    assert [row.node_id for row in tree_rows(tasks, [{"group_id": "g"}])] == ["g", "a", "c", "b"]


def test_a_dag_without_groups_keeps_its_rows_and_an_unlisted_or_looping_group_is_still_a_group():
    assert [row.node_id for row in tree_rows(TASKS[:1] + TASKS[3:], [])] == ["begin", "crm_loaded", "end"]
    looping = [{"group_id": "x", "parent_id": "y"}, {"group_id": "y", "parent_id": "x"}]
    rows = tree_rows([{"task_id": "t", "task_group": "x"}, {"task_id": "u", "task_group": "lost"}], looping)
    assert [(row.node_id, row.ancestors) for row in rows] == [
        ("y", ()), ("x", ("y",)), ("t", ("y", "x")), ("lost", ()), ("u", ("lost",))]


def test_the_grid_has_a_row_per_group_with_its_tasks_state_per_run():
    runs = [{"run_id": "r1", "state": "failed"}]
    instances = [{"run_id": "r1", "task_id": "crm.fetch", "state": "success", "try_number": 1},
                 {"run_id": "r1", "task_id": "crm.clean.dedupe", "state": "failed", "try_number": 1}]
    built = views.grid(TASKS, runs, instances, "d", GROUPS)
    groups = {row["group_id"]: (row["count"], row["cells"][0]["state"]) for row in built["rows"]
              if row["kind"] == "group"}
    assert groups == {"crm": (2, "failed"), "crm.clean": (1, "failed")}
    end = built["rows"][-1]
    assert (end["task_id"], end["mark"], end["mark_label"], end["ancestors"]) == ("end", "↧", "teardown task", [])


def _inside(box, frame: Frame) -> bool:
    return (frame.x <= box.x and box.x + box.width <= frame.x + frame.width
            and frame.y <= box.y and box.y + box.height <= frame.y + frame.height)


def test_frames_hold_their_members_and_edges_point_right():
    result = grouped_layout(TASKS, GROUPS)
    frames = {frame.group_id: frame for frame in result.frames}
    nodes = {node.node_id: node for node in result.nodes}
    assert [frame.group_id for frame in result.frames] == ["crm", "crm.clean"]  # outer first: drawn below
    assert _inside(nodes["crm.fetch"], frames["crm"]) and _inside(frames["crm.clean"], frames["crm"])
    assert _inside(nodes["crm.clean.dedupe"], frames["crm.clean"]) and not _inside(nodes["begin"], frames["crm"])
    for edge in result.edges:
        assert nodes[edge.upstream].x + nodes[edge.upstream].width < nodes[edge.downstream].x, edge


def test_a_collapsed_group_is_one_box_with_its_tasks_edges():
    result = grouped_layout(TASKS, GROUPS, {"crm"})
    assert [(node.node_id, node.kind) for node in result.nodes if node.kind == "group"] == [("crm", "group")]
    assert {node.node_id for node in result.nodes} == {"begin", "crm", "crm_loaded", "end"}
    assert (result.frames, {(edge.upstream, edge.downstream) for edge in result.edges}) == (
        [], {("begin", "crm"), ("crm", "crm_loaded"), ("crm_loaded", "end"), ("begin", "end")})
    inner = grouped_layout(TASKS, GROUPS, {"crm.clean"})
    assert [frame.group_id for frame in inner.frames] == ["crm"]
    assert ("crm.fetch", "crm.clean") in {(edge.upstream, edge.downstream) for edge in inner.edges}


def test_a_task_outside_a_group_between_two_of_its_tasks_is_a_cycle_of_groups():
    tasks = [{"task_id": "g.a", "task_group": "g"}, {"task_id": "x", "upstream": ["g.a"]},
             {"task_id": "g.b", "upstream": ["x"], "task_group": "g"}]
    with pytest.raises(graph.CyclicGraph):
        grouped_layout(tasks, [{"group_id": "g"}])
    assert len(grouped_layout(tasks, []).nodes) == 3  # drawn without its groups


@pytest.mark.parametrize("seed", range(5))
def test_random_nested_groups_keep_edges_right_and_boxes_apart(seed):
    rng = random.Random(seed)
    groups = [{"group_id": f"g{index}", "parent_id": f"g{rng.randrange(index)}" if index and rng.random() < .5
               else ""} for index in range(6)]
    # Each task's upstream tasks share its group: no task sits outside a group between two of its tasks.
    tasks: list[dict] = []
    for index in range(60):
        group = rng.choice(groups + [{"group_id": ""}])["group_id"]
        mates = [task["task_id"] for task in tasks if task["task_group"] == group]
        tasks.append({"task_id": f"t{index}", "task_group": group,
                      "upstream": rng.sample(mates, min(len(mates), rng.randrange(3)))})
    collapsed = {group["group_id"] for group in groups if rng.random() < .3}
    result = grouped_layout(tasks, groups, collapsed)
    nodes = {node.node_id: node for node in result.nodes}
    for edge in result.edges:
        assert nodes[edge.upstream].x + nodes[edge.upstream].width < nodes[edge.downstream].x
    boxes = [(node.x, node.y, node.x + node.width, node.y + node.height) for node in result.nodes]
    for index, one in enumerate(boxes):
        for other in boxes[index + 1:]:
            assert one[2] <= other[0] or other[2] <= one[0] or one[3] <= other[1] or other[3] <= one[1]


def test_toggles_are_query_strings_of_the_collapsed_groups_the_dag_has():
    assert graph_view.collapsed_groups("crm, nope,crm.clean", ["crm", "crm.clean", "x"]) == {"crm", "crm.clean"}
    assert graph_view.toggled({"crm"}, "crm") == ""
    assert graph_view.toggled({"crm"}, "a&b") == "?collapsed=a%26b,crm"
