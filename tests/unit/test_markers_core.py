"""ExternalTaskMarker in the scheduler's core (issue 24): given a recursive clear of a marker on the
parent DAG's partition, these decisions: a clear of the task it names on the child DAG's partition (by
logical date, with what follows it), once, and on through markers there as deep as allowed."""

from __future__ import annotations

from typing import Any

from schemas import (
    ClearTask,
    CommandRejected,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    ExternalClearsSent,
    MarkerDefinition,
    TaskCleared,
    TaskDefinition,
    TaskEmptySucceeded,
)
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.markers import marker_request_id
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import POLICY

LOGICAL = 5_000.0


def dag(dag_id: str, marker: MarkerDefinition | None = None) -> DagParsed:
    tasks = [TaskDefinition(task_id="t", kind="empty"), TaskDefinition(task_id="u", kind="empty", upstream=["t"])]
    if marker is not None:
        tasks.append(TaskDefinition(task_id="m", kind="empty", upstream=["u"], marker=marker))
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=tasks)
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}", definition=definition,
                     at=0.0)


def ran(dag_parsed: DagParsed, logical_date: float = LOGICAL) -> SchedulerState:
    """The DAG's run at the logical date, decided to its end (empty tasks succeed without a try)."""
    run = DagRunCreated(dag_id=dag_parsed.dag_id, run_id=f"scheduled__{dag_parsed.dag_id}", logical_date=logical_date,
                        run_type="scheduled", dag_fingerprint="fp", scheduler_id="sched-a", at=1.0)
    state = fold(SchedulerState(), [dag_parsed, run])
    for now in (2.0, 3.0, 4.0, 5.0):
        fold(state, decide(state, now, POLICY))
    return state


def clear_marker(recursive: bool = True) -> ClearTask:
    return ClearTask(dag_id="parent", run_id="scheduled__parent", task_id="m", request_id="req-1",
                     recursive=recursive, requested_by="ops", at=10.0)


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_a_recursive_clear_of_a_marker_asks_the_child_dag_to_clear_its_task_at_the_runs_logical_date():
    parent = ran(dag("parent", MarkerDefinition(external_dag_id="child", external_task_id="t", recursion_depth=3)))
    fold(parent, [clear_marker()])
    decided = decide(parent, 11.0, POLICY)
    [asked] = [event for event in of(ClearTask, decided) if event.dag_id == "child"]
    assert (asked.run_id, asked.logical_date, asked.task_id, asked.downstream, asked.recursive,
            asked.recursion_left) == ("", LOGICAL, "t", True, True, 2)
    assert asked.request_id == marker_request_id("req-1", "parent", "m") and asked.requested_by == "ops"
    [sent] = of(ExternalClearsSent, decided)
    fold(parent, [sent])
    assert of(ClearTask, decide(parent, 12.0, POLICY)) == []  # asked once

    child = ran(dag("child"))
    fold(child, [asked])
    cleared = of(TaskCleared, decide(child, 13.0, POLICY))
    assert sorted(event.task_id for event in cleared) == ["t", "u"]  # the task and what follows it


def test_a_clear_that_is_not_recursive_or_clears_no_marker_asks_nothing_of_another_dag():
    parent = ran(dag("parent", MarkerDefinition(external_dag_id="child", external_task_id="t")))
    fold(parent, [clear_marker(recursive=False)])
    assert [event for event in of(ClearTask, decide(parent, 11.0, POLICY)) if event.dag_id == "child"] == []
    fold(parent, [ClearTask(dag_id="parent", run_id="scheduled__parent", task_id="t", request_id="req-2",
                            recursive=True, at=12.0)])  # t and nothing after it: no marker cleared
    assert parent.external_clears == {}


def test_the_recursion_stops_at_the_depth_the_first_marker_allows():
    child = ran(dag("child", MarkerDefinition(external_dag_id="grandchild", external_task_id="t")))
    last = ClearTask(dag_id="child", run_id="", logical_date=LOGICAL, task_id="t", request_id="r", downstream=True,
                     recursive=True, recursion_left=0, at=10.0)
    fold(child, [last])
    assert child.external_clears == {}  # the depth is spent: its marker is cleared, nothing further is asked
    assert "m" in {event.task_id for event in of(TaskCleared, decide(child, 11.0, POLICY))}
    deeper = ran(dag("child", MarkerDefinition(external_dag_id="grandchild", external_task_id="t")))
    fold(deeper, [ClearTask(dag_id="child", run_id="", logical_date=LOGICAL, task_id="t", request_id="r2",
                            downstream=True, recursive=True, recursion_left=1, at=10.0)])
    [(_dag, [onward])] = deeper.external_clears.values()
    assert (onward.dag_id, onward.recursion_left) == ("grandchild", 0)


def test_a_child_with_no_run_at_that_logical_date_refuses_the_clear_saying_so():
    child = ran(dag("child"), logical_date=LOGICAL + 86_400)
    fold(child, [ClearTask(dag_id="child", run_id="", logical_date=LOGICAL, task_id="t", request_id="r",
                           downstream=True, recursive=True, recursion_left=5, at=10.0)])
    [refused] = of(CommandRejected, decide(child, 11.0, POLICY))
    assert "has no run at" in refused.reason


def test_the_clears_due_survive_a_snapshot():
    parent = ran(dag("parent", MarkerDefinition(external_dag_id="child", external_task_id="t")))
    fold(parent, [clear_marker()])
    restored = decode_snapshot(encode_snapshot(Snapshot(0, parent, {}))).state
    assert restored.external_clears == parent.external_clears
    assert of(ClearTask, decide(restored, 11.0, POLICY)) == of(ClearTask, decide(parent, 11.0, POLICY))


def test_the_marker_itself_does_nothing_when_it_runs():
    parent = fold(SchedulerState(), [dag("parent", MarkerDefinition(external_dag_id="child", external_task_id="t"))])
    fold(parent, [DagRunCreated(dag_id="parent", run_id="r", logical_date=LOGICAL, run_type="manual",
                                dag_fingerprint="fp", scheduler_id="sched-a", at=1.0)])
    succeeded = []
    for now in (2.0, 3.0, 4.0):
        decided = decide(parent, now, POLICY)
        succeeded += [event.task_id for event in of(TaskEmptySucceeded, decided)]
        fold(parent, decided)
    assert "m" in succeeded
