"""Limits (issue 23): a DAG's max_active_tasks across its runs, a task's max_active_tis_per_dag across
the DAG's runs and max_active_tis_per_dagrun within a run. Given these events, when deciding, then
these tries are queued and the rest wait without an event; counted from the fold, so a replay decides
the same; and under any interleaving of try ends the limits hold and every run still finishes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import TaskQueued, TaskRetryScheduled
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.limits import Room
from services.scheduler.core.model import ACTIVE
from services.scheduler.runs_touched import run_of
from tests.unit.limits_fixtures import dag, failed, queued, queued_now, run, running, state_of, succeeded
from tests.unit.scheduler_fixtures import POLICY

THREE_RUNS = (run("r1", 100.0), run("r2", 200.0), run("r3", 300.0))


def test_max_active_tasks_counts_across_the_dags_runs():
    state = state_of(dag({"a": []}, max_active_tasks=2), *THREE_RUNS)
    assert queued_now(state) == [("r1", "a"), ("r2", "a")]


def test_queued_and_running_tries_both_count():
    state = state_of(dag({"a": [], "b": [], "c": []}, max_active_tasks=2), run("r1", 100.0),
                     *running("r1", "a"), queued("r1", "b"))
    assert queued_now(state) == []


def test_a_held_back_task_writes_nothing_and_is_queued_when_a_try_ends_in_another_run():
    given_events = [dag({"a": []}, max_active_tasks=2), *THREE_RUNS, queued("r1", "a"), queued("r2", "a")]
    state = state_of(*given_events)
    assert decide(state, 10.0, POLICY, touched={("etl", "r3")}) == []  # r3 waits, and says nothing
    fold(state, [succeeded("r1", "a", at=11.0)])
    # Only r1 was touched (its try ended): r3, held back, is walked with it.
    decided = decide(state, 12.0, POLICY, touched={("etl", "r1")})
    assert [(type(event).__name__, event.run_id) for event in decided] == [
        ("DagRunFinished", "r1"), ("TaskQueued", "r3")]


def test_max_active_tis_per_dag_limits_one_task_across_runs_not_the_others():
    state = state_of(dag({"a": [], "b": []}, task_options={"a": {"max_active_tis_per_dag": 1}}), *THREE_RUNS)
    assert queued_now(state) == [("r1", "a"), ("r1", "b"), ("r2", "b"), ("r3", "b")]


def test_max_active_tis_per_dagrun_limits_within_a_run_only():
    # One instance per task and run (no mapped tasks yet): a per-run limit of 1 holds nothing back.
    state = state_of(dag({"a": []}, task_options={"a": {"max_active_tis_per_dagrun": 1}}), *THREE_RUNS[:2])
    assert queued_now(state) == [("r1", "a"), ("r2", "a")]


def test_the_room_of_one_run_is_its_own():
    room = Room()
    room.take(("etl", "r1", "a"))
    entry = state_of(dag({"a": []}, task_options={"a": {"max_active_tis_per_dagrun": 1}})).dags["etl"]
    assert not room.fits(entry, ("etl", "r1", "a")) and room.fits(entry, ("etl", "r2", "a"))


def test_a_retry_that_is_due_waits_for_room_too():
    options = {"a": {"retries": 1, "retry_delay": 0.0}}
    state = state_of(dag({"a": [], "b": []}, task_options=options, max_active_tasks=1), run("r1", 100.0),
                     queued("r1", "a"), failed("r1", "a", at=5.0))
    retry = decide(state, 6.0, POLICY)
    assert [type(event) for event in retry] == [TaskRetryScheduled, TaskQueued]  # b takes the one slot
    fold(state, retry)
    assert queued_now(state, 7.0) == []  # a is due, and waits for b
    fold(state, [succeeded("r1", "b", at=8.0)])
    assert queued_now(state, 9.0) == [("r1", "a")]


def test_other_dags_are_not_held_back():
    state = state_of(dag({"a": []}, max_active_tasks=1), dag({"a": []}, dag_id="other", max_active_tasks=1),
                     run("r1", 100.0), run("r1", 100.0, dag_id="other"), queued("r1", "a"))
    assert [(event.dag_id, event.task_id) for event in decide(state, 10.0, POLICY)
            if isinstance(event, TaskQueued)] == [("other", "a")]


def test_a_replay_of_the_log_decides_the_same():
    log = [dag({"a": [], "b": []}, max_active_tasks=2, task_options={"b": {"priority_weight": 3}}), *THREE_RUNS]
    live = state_of(*log)
    for now in (10.0, 20.0):
        decided = decide(live, now, POLICY)
        log += decided
        fold(live, decided)
    log.append(succeeded("r1", "b", at=21.0))
    fold(live, [log[-1]])
    replayed = state_of(*log)
    assert replayed == live and decide(replayed, 22.0, POLICY) == decide(live, 22.0, POLICY)


# -- any interleaving --------------------------------------------------------------------------

EDGES = {"a": [], "b": [], "c": ["a"], "d": ["a", "b"]}
LIMITS = {"max_active_tasks": 3}
TASK_LIMITS = {"a": {"max_active_tis_per_dag": 1, "retries": 1, "retry_delay": 0.0},
               "b": {"priority_weight": 4, "retries": 1, "retry_delay": 0.0}, "c": {"max_active_tis_per_dag": 2}}
STEP = st.tuples(st.sampled_from(("succeed", "fail", "decide")), st.integers(0, 1000))


def active_counts(state: SchedulerState) -> tuple[int, dict[str, int]]:
    keys = [key for key in [*state.unlaunched, *state.live] if (found := state.instance(key)) and found.state in ACTIVE]
    per_task: dict[str, int] = {}
    for _dag, _run, task_id in keys:
        per_task[task_id] = per_task.get(task_id, 0) + 1
    return len(keys), per_task


def assert_within_limits(state: SchedulerState) -> None:
    total, per_task = active_counts(state)
    assert total <= LIMITS["max_active_tasks"]
    for task_id, options in TASK_LIMITS.items():
        assert per_task.get(task_id, 0) <= options.get("max_active_tis_per_dag", total)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, max_size=40), st.integers(2, 4))
def test_under_any_interleaving_of_try_ends_the_limits_hold_and_replay_equals_live(steps, runs):
    log = [dag(EDGES, task_options=TASK_LIMITS, **LIMITS), *(run(f"r{n}", 100.0 * n) for n in range(runs))]
    live, touched, now = state_of(*log), None, 10.0

    def append(events: list) -> None:
        nonlocal touched
        log.extend(events)
        fold(live, events)
        touched = (touched or set()) | {key for key in map(run_of, events) if key is not None}
        assert_within_limits(live)

    def decide_now() -> None:
        nonlocal touched
        decided, touched = decide(live, now, POLICY, touched), set()
        append(decided)

    for action, pick in [*steps, *[("decide", 0), ("succeed", 0)] * 60]:
        now += 1.0
        active = sorted(key for key in live.unlaunched)
        if action == "decide" or not active:
            decide_now()
            continue
        _dag, run_id, task_id = active[pick % len(active)]
        try_number = live.instance(active[pick % len(active)]).try_number
        ended = succeeded if action == "succeed" else failed
        append([ended(run_id, task_id, try_number, at=now)])
    assert not live.runs, "every run finishes: a task held back is queued once there is room"
    assert state_of(*log) == live
