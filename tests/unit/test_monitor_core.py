"""The monitor's core: given these events, at this time, then these DeadlineMissed; windowed
statistics placed by the events' own timestamps."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    CallbackCalled,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DeadlineMissed,
    TaskAdopted,
    TaskDefinition,
    TaskFailed,
    TaskLaunched,
    TaskQueued,
    TaskRetryScheduled,
    TaskStarted,
    TaskSucceeded,
)
from services.monitor.core import (
    HOPPING_5M_1M,
    QUEUE_LATENCY,
    RUN_DURATION,
    TASK_DURATION,
    TASK_FAILED,
    TUMBLING_5M,
    DagDefinitionRemoved,
    MonitorState,
    UnknownEvent,
    WindowedStats,
    decide,
    due_notifications,
    evolve,
    fold,
    merged,
    next_deadline,
    table,
)

T0 = 1_000_200.0  # a multiple of 300 and of 60: window boundaries are easy to read
RUN = "manual__r1"


def parsed(dag_id: str = "etl", deadline: float | None = 5.0) -> DagParsed:
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", deadline=deadline,
                               tasks=[TaskDefinition(task_id="a", kind="bash", command="true")])
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0)


def created(at: float = T0, run_id: str = RUN, dag_id: str = "etl") -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual", dag_fingerprint="fp",
                         scheduler_id="s", at=at)


def finished(at: float, state: str = "success", run_id: str = RUN) -> DagRunFinished:
    return DagRunFinished(dag_id="etl", run_id=run_id, state=state, at=at)


def missed(at: float, run_id: str = RUN) -> DeadlineMissed:
    return DeadlineMissed(dag_id="etl", run_id=run_id, deadline=T0 + 5, at=at)


def try_events(task_id: str, queued_at: float, started_at: float, ended_at: float, *, failed: bool = False,
               executor: str = "local", queue: str = "default", try_number: int = 1) -> list:
    common = {"dag_id": "etl", "run_id": RUN, "task_id": task_id, "try_number": try_number}
    outcome = (TaskFailed(**common, runner_id="r", error="boom", at=ended_at) if failed
               else TaskSucceeded(**common, runner_id="r", at=ended_at))
    return [TaskQueued(**common, executor=executor, queue=queue, scheduler_id="s", at=queued_at),
            TaskLaunched(**common, executor=executor, handle="1@h:1", scheduler_id="s", at=queued_at),
            TaskStarted(**common, runner_id="r", hostname="h", pid=1, at=started_at), outcome]


@pytest.mark.parametrize("events, now, expected", [
    ([parsed(), created()], T0 + 4.9, []),
    ([parsed(), created()], T0 + 5.0, [missed(T0 + 5.0)]),
    ([parsed(), created()], T0 + 60, [missed(T0 + 60)]),
    ([parsed(), created(), finished(T0 + 4)], T0 + 60, []),  # finished in time
    # Ended past its deadline while no monitor wrote the miss: written late, once, within the horizon.
    ([parsed(), created(), finished(T0 + 20)], T0 + 60, [missed(T0 + 60)]),
    ([parsed(), created(), finished(T0 + 20)], T0 + 5 + 3600, [missed(T0 + 5 + 3600)]),
    ([parsed(), created(), finished(T0 + 20)], T0 + 5 + 3601, []),
    ([parsed(), created(), finished(T0 + 20), missed(T0 + 30)], T0 + 60, []),
    ([parsed(), created(), finished(T0 + 20), created(T0 + 9000, "r2"), finished(T0 + 9001, run_id="r2")],
     T0 + 9001, []),  # forgotten once event time is past the horizon
    ([parsed(), created(), missed(T0 + 5)], T0 + 60, []),  # already in the log
    ([parsed(), created(), missed(T0 + 5), finished(T0 + 7), DagRunReopened(dag_id="etl", run_id=RUN, at=T0 + 9)],
     T0 + 60, []),  # once per run, even reopened
    ([parsed(deadline=None), created()], T0 + 60, []),  # no deadline declared
    ([parsed(), DagDefinitionRemoved("etl"), created()], T0 + 60, []),
    ([created(), parsed()], T0 + 5, [missed(T0 + 5)]),  # the definition may come after the run
    ([parsed(), created(), finished(T0 + 4), DagRunReopened(dag_id="etl", run_id=RUN, at=T0 + 10)],
     T0 + 15, [DeadlineMissed(dag_id="etl", run_id=RUN, deadline=T0 + 15, at=T0 + 15)]),  # counts from reopening
])
def test_deadline_misses(events, now, expected):
    assert decide(fold(events), now) == expected


def test_a_committed_decision_folded_is_not_decided_again():
    state = fold([parsed(), created()])
    decisions = decide(state, T0 + 6)
    fold(decisions, state)
    assert decide(state, T0 + 100) == []
    fold(decisions, state)  # read back from the log: counted once
    assert [row["count"] for row in table(state.stats.cells, {"tumbling": 300, "hopping": 300})
            if row["measure"] == "deadline_misses" and row["window"] == "tumbling"] == [1]


def test_each_run_is_timed_from_its_own_start():
    state = fold([parsed(), created(T0, "r1"), created(T0 + 3, "r2")])
    assert next_deadline(state) == T0 + 5
    assert [event.run_id for event in decide(state, T0 + 6)] == ["r1"]
    assert [event.run_id for event in decide(state, T0 + 8)] == ["r1", "r2"]


def test_events_the_monitor_does_not_measure_change_nothing_and_strangers_raise():
    state = fold([parsed(), created()])
    evolve(state, TaskRetryScheduled(dag_id="etl", run_id=RUN, task_id="a", try_number=1, next_try_number=2,
                                     not_before=T0, at=T0))
    with pytest.raises(UnknownEvent):
        evolve(state, object())


def cells_of(state: MonitorState, measure: str, window: str) -> dict:
    return {(tuple(row["key"]), row["start"]): row
            for row in table(state.stats.cells, {"tumbling": 300.0, "hopping": 300.0})
            if row["measure"] == measure and row["window"] == window}


def test_durations_and_latencies_come_from_event_timestamps():
    events = [parsed(), created(T0), *try_events("a", T0 + 1, T0 + 3, T0 + 13),
              *try_events("b", T0 + 2, T0 + 2.5, T0 + 310, failed=True, executor="celery", queue="q1"),
              finished(T0 + 320, "failed")]
    state = fold(events)
    tasks = cells_of(state, TASK_DURATION, "tumbling")
    assert tasks[(("etl", "a"), T0)]["sum"] == 10.0
    assert tasks[(("etl", "b"), T0 + 300)]["sum"] == pytest.approx(307.5)  # placed by its end
    latency = cells_of(state, QUEUE_LATENCY, "tumbling")
    assert latency[(("local", "default"), T0)]["mean"] == 2.0
    assert latency[(("celery", "q1"), T0)]["mean"] == 0.5
    runs = cells_of(state, RUN_DURATION, "tumbling")
    assert runs[(("etl",), T0 + 300)]["max"] == 320.0
    failures = cells_of(state, TASK_FAILED, "tumbling")
    assert failures[(("etl",), T0)]["mean"] == 0.0 and failures[(("etl",), T0 + 300)]["mean"] == 1.0


def test_hopping_windows_hold_each_observation_in_size_over_step_windows():
    state = fold([parsed(), created(T0), *try_events("a", T0 + 1, T0 + 130, T0 + 140)])
    starts = sorted(start for (_key, start) in cells_of(state, TASK_DURATION, "hopping"))
    assert starts == [T0 + 120 - 60 * index for index in range(5)][::-1]
    assert HOPPING_5M_1M.starts(T0 + 140) == [T0 + 120, T0 + 60, T0, T0 - 60, T0 - 120]
    assert TUMBLING_5M.starts(T0 + 299.9) == [T0]


def test_old_windows_are_dropped_past_the_retention():
    stats = WindowedStats(retention=600.0)
    stats.observe("m", ("k",), T0, 1.0)
    stats.observe("m", ("k",), T0 + 3000, 1.0)
    assert {cell[3] for cell in stats.cells if cell[2] == "tumbling"} == {T0 + 3000}
    stats.observe("m", ("k",), T0, 1.0)  # too late to count
    assert {cell[3] for cell in stats.cells if cell[2] == "tumbling"} == {T0 + 3000}


def test_partitions_merge_into_one_table():
    one = fold([*try_events("a", T0, T0 + 1, T0 + 2)])
    two = fold([*try_events("a", T0, T0 + 3, T0 + 4)])
    cells = merged([one.stats, two.stats])
    assert cells[(QUEUE_LATENCY, ("local", "default"), "tumbling", T0)].as_dict()["mean"] == 2.0


def adopted(at: float) -> TaskAdopted:
    return TaskAdopted(dag_id="etl", run_id=RUN, task_id="a", try_number=1, handle="h", by_scheduler="b",
                       from_scheduler="a", at=at)


@given(st.lists(st.sampled_from(["create", "finish", "miss", "reopen", "adopt"]), max_size=30),
       st.integers(min_value=0, max_value=30))
def test_folding_in_pieces_equals_folding_at_once_and_misses_come_once(steps, cut):
    builders = {"create": lambda at: created(at), "finish": lambda at: finished(at),
                "miss": lambda at: missed(at), "adopt": adopted,
                "reopen": lambda at: DagRunReopened(dag_id="etl", run_id=RUN, at=at)}
    events = [parsed()] + [builders[step](T0 + index) for index, step in enumerate(steps)]
    whole = fold(events)
    pieces = fold(events[cut:], fold(events[:cut]))
    assert (whole.runs, whole.missed, whole.stats.cells) == (pieces.runs, pieces.missed, pieces.stats.cells)
    now = T0 + 1000
    fold(decide(whole, now), whole)
    assert decide(whole, now) == [] and len(whole.missed) <= 1


HOOK = "http://hooks.example/tock"


def with_callbacks(at: float = 0.0, **targets) -> DagParsed:
    event = parsed()
    definition = dataclasses.replace(event.definition, **targets)
    return dataclasses.replace(event, definition=definition, at=at)


def called(trigger: str, ok: bool = True) -> CallbackCalled:
    return CallbackCalled(dag_id="etl", run_id=RUN, trigger=trigger, target=HOOK, attempts=1, ok=ok, at=T0 + 50)


@pytest.mark.parametrize("events, expected", [
    ([with_callbacks(on_deadline_missed=HOOK), created(), missed(T0 + 5)], [(RUN, "deadline_missed")]),
    ([with_callbacks(on_failure=HOOK), created(), finished(T0 + 9, "failed")], [(RUN, "failure")]),
    ([with_callbacks(on_failure=HOOK), created(), finished(T0 + 9, "success")], []),
    ([with_callbacks(on_failure=HOOK), created(), missed(T0 + 5)], []),  # not asked for misses
    ([parsed(), created(), missed(T0 + 5), finished(T0 + 9, "failed")], []),  # no callbacks declared
    ([with_callbacks(on_deadline_missed=HOOK), created(), missed(T0 + 5), called("deadline_missed")], []),
    ([with_callbacks(on_deadline_missed=HOOK), created(), missed(T0 + 5), called("deadline_missed", ok=False)],
     []),  # the caller retried already: a failed call sequence is recorded, not repeated
    ([with_callbacks(at=T0 + 100, on_failure=HOOK), created(), finished(T0 + 9, "failed")], []),  # older
])
def test_callbacks_owed(events, expected):
    owed = due_notifications(fold(events).notifications)
    assert [(notification.run_id, notification.trigger) for notification in owed] == expected
    assert all(notification.target == HOOK and notification.payload["run_id"] == RUN for notification in owed)


def test_a_deadline_callback_payload_names_the_run_and_its_deadline():
    (owed,) = due_notifications(fold([with_callbacks(on_deadline_missed=HOOK), created(),
                                      missed(T0 + 5)]).notifications)
    assert owed.payload == {"dag_id": "etl", "run_id": RUN, "trigger": "deadline_missed", "at": T0 + 5,
                            "deadline": T0 + 5}


def test_tries_left_open_are_forgotten_with_their_run():
    queued_only = try_events("never", T0, T0 + 1, T0 + 2)[:1]
    started_only = try_events("silent", T0, T0 + 1, T0 + 2)[:3]
    state = fold([parsed(), created(), *queued_only, *started_only])
    assert len(state.queued) == 1 and len(state.started) == 1
    fold([finished(T0 + 9, "failed")], state)
    assert state.queued == {} and state.started == {}
