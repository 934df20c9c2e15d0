"""Per-task deadlines in the monitor's core: given these events, at this time, then these
TaskDeadlineMissed. A task instance is timed from its first TaskQueued in the run (a retry does
not restart the clock; a clear does) and misses once, if it has not ended by then."""

from __future__ import annotations

import dataclasses

import pytest

from schemas import (
    CallbackCalled,
    DagDefinition,
    DagParsed,
    DeadlineMissed,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDefinition,
    TaskFailed,
    TaskQueued,
    TaskRetryScheduled,
    TaskSkipped,
    TaskSucceeded,
)
from services.monitor.core import TASK_DEADLINE_MISSES, decide, due_notifications, fold, next_deadline, table
from tests.unit.test_monitor_core import RUN, T0, created, finished

IDS = {"dag_id": "etl", "run_id": RUN, "task_id": "a"}


def parsed(task_deadline: float | None = 10.0, run_deadline: float | None = None) -> DagParsed:
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", deadline=run_deadline,
                               tasks=[TaskDefinition(task_id="a", kind="bash", command="true", deadline=task_deadline),
                                      TaskDefinition(task_id="b", kind="bash", command="true")])
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0)


def queued(at: float, try_number: int = 1, task_id: str = "a") -> TaskQueued:
    return TaskQueued(**{**IDS, "task_id": task_id}, try_number=try_number, executor="local", queue="default",
                      scheduler_id="s", at=at)


def succeeded(at: float, try_number: int = 1) -> TaskSucceeded:
    return TaskSucceeded(**IDS, try_number=try_number, runner_id="r", at=at)


def failed(at: float, try_number: int = 1) -> TaskFailed:
    return TaskFailed(**IDS, try_number=try_number, runner_id="r", error="boom", at=at)


def retry(at: float) -> TaskRetryScheduled:
    return TaskRetryScheduled(**IDS, try_number=1, next_try_number=2, not_before=at + 1, at=at)


def task_missed(deadline: float, at: float) -> TaskDeadlineMissed:
    return TaskDeadlineMissed(**IDS, deadline=deadline, at=at)


@pytest.mark.parametrize("events, now, expected", [
    ([parsed(), created(), queued(T0 + 2)], T0 + 11.9, []),
    ([parsed(), created(), queued(T0 + 2)], T0 + 12, [task_missed(T0 + 12, T0 + 12)]),
    ([parsed(), created(), queued(T0 + 2), succeeded(T0 + 8)], T0 + 60, []),  # ended in time
    ([parsed(), created(), queued(T0 + 2), failed(T0 + 8)], T0 + 60, []),  # failed for good: ended
    # A retry to come is not an end, and the clock runs from the first TaskQueued of the run.
    ([parsed(), created(), queued(T0 + 2), failed(T0 + 4), retry(T0 + 4)], T0 + 12, [task_missed(T0 + 12, T0 + 12)]),
    ([parsed(), created(), queued(T0 + 2), failed(T0 + 4), retry(T0 + 4), queued(T0 + 6, 2)], T0 + 12,
     [task_missed(T0 + 12, T0 + 12)]),
    ([parsed(), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12)], T0 + 60, []),  # already in the log
    ([parsed(), created(), queued(T0 + 2), finished(T0 + 5)], T0 + 60, []),  # the run ended: so did its tasks
    ([parsed(), created(), queued(T0 + 2, task_id="b")], T0 + 600, []),  # b declares no deadline
    ([parsed(task_deadline=None), created(), queued(T0 + 2)], T0 + 600, []),
    ([parsed(), created(), TaskSkipped(**IDS, at=T0 + 1)], T0 + 600, []),  # never queued
    # Cleared: timed afresh from its next TaskQueued; a miss already written is the only one.
    ([parsed(), created(), queued(T0 + 2), succeeded(T0 + 3), TaskCleared(**IDS, try_number=1, at=T0 + 50),
      queued(T0 + 51, 2)], T0 + 61, [task_missed(T0 + 61, T0 + 61)]),
    ([parsed(), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12), TaskCleared(**IDS, try_number=1, at=T0 + 50),
      queued(T0 + 51, 2)], T0 + 600, []),
    ([created(), queued(T0 + 2), parsed()], T0 + 12, [task_missed(T0 + 12, T0 + 12)]),  # definition comes later
])
def test_task_deadline_misses(events, now, expected):
    assert decide(fold(events), now) == expected


def test_run_and_task_misses_are_decided_side_by_side_and_each_once():
    state = fold([parsed(run_deadline=30.0), created(), queued(T0 + 2)])
    assert next_deadline(state) == T0 + 12
    decisions = decide(state, T0 + 40)
    assert [type(event) for event in decisions] == [DeadlineMissed, TaskDeadlineMissed]
    fold(decisions, state)
    assert decide(state, T0 + 100) == [] and next_deadline(state) == float("inf")
    fold(decisions, state)  # read back from the log: counted once
    rows = [row for row in table(state.stats.cells, {"tumbling": 300, "hopping": 300})
            if row["measure"] == TASK_DEADLINE_MISSES and row["window"] == "tumbling"]
    assert [(row["key"], row["count"]) for row in rows] == [(["etl", "a"], 1)]


def test_a_task_instance_of_a_new_definition_uses_the_new_deadline():
    state = fold([parsed(), created(), queued(T0 + 2), parsed(task_deadline=100.0)])
    assert decide(state, T0 + 60) == [] and next_deadline(state) == T0 + 102


def test_task_instances_are_forgotten_with_their_run_but_misses_are_not():
    state = fold([parsed(), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12), finished(T0 + 20)])
    assert state.tasks == {} and state.tasks_missed == {("etl", RUN, "a")}
    assert decide(fold([queued(T0 + 30, 2)], state), T0 + 600) == []  # queued again in a reopened run


HOOK = "http://hooks.example/tock"


def with_hook(event: DagParsed) -> DagParsed:
    return dataclasses.replace(event, definition=dataclasses.replace(event.definition, on_deadline_missed=HOOK))


def task_called(task_id: str = "a") -> CallbackCalled:
    return CallbackCalled(dag_id="etl", run_id=RUN, trigger="deadline_missed", task_id=task_id, target=HOOK,
                          attempts=1, ok=True, at=T0 + 50)


@pytest.mark.parametrize("events, expected", [
    ([with_hook(parsed()), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12)], [("deadline_missed", "a")]),
    # The run's own miss and its task's are two calls, each settled by its own CallbackCalled.
    ([with_hook(parsed(run_deadline=5.0)), created(), queued(T0 + 2), DeadlineMissed(
        dag_id="etl", run_id=RUN, deadline=T0 + 5, at=T0 + 5), task_missed(T0 + 12, T0 + 12)],
     [("deadline_missed", ""), ("deadline_missed", "a")]),
    ([with_hook(parsed()), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12), task_called()], []),
    ([with_hook(parsed()), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12), task_called("")],
     [("deadline_missed", "a")]),  # the run's call settles nothing of the task's
    ([parsed(), created(), queued(T0 + 2), task_missed(T0 + 12, T0 + 12)], []),  # no callback declared
])
def test_a_task_miss_owes_the_dags_deadline_callback(events, expected):
    owed = due_notifications(fold(events).notifications)
    assert [(notification.trigger, notification.task_id) for notification in owed] == expected


def test_a_task_miss_callback_payload_names_the_task():
    (owed,) = due_notifications(fold([with_hook(parsed()), created(), queued(T0 + 2),
                                      task_missed(T0 + 12, T0 + 13)]).notifications)
    assert owed.payload == {"dag_id": "etl", "run_id": RUN, "task_id": "a", "trigger": "deadline_missed",
                            "at": T0 + 13, "deadline": T0 + 12}
