"""Scheduler core invariants (Hypothesis): folding in pieces equals folding at once, replay is
idempotent, no try is queued twice, and a simulated log always ends with every run finished."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import DagRunFinished, TaskFailed, TaskQueued, TaskSucceeded, TriggerDagRun
from services.scheduler.core import SchedulerState, decide, evolve, fold
from tests.unit.scheduler_fixtures import POLICY, parsed


@st.composite
def dags(draw):
    """A random DAG: task i may depend on any earlier task."""
    count = draw(st.integers(1, 6))
    edges = {f"t{i}": sorted(draw(st.sets(st.sampled_from([f"t{j}" for j in range(i)]), max_size=i))
                            if i else set())
             for i in range(count)}
    return parsed(edges=edges, retries=draw(st.integers(0, 2)), retry_delay=0.0)


@st.composite
def simulated_logs(draw):
    """The log of a scheduler driving one DAG through a few runs, each try's outcome drawn at random."""
    dag = draw(dags())
    log = [dag] + [TriggerDagRun(dag_id="etl", request_id=f"r{i}", at=0.0) for i in range(draw(st.integers(1, 3)))]
    state = fold(SchedulerState(), log)
    now = 1.0
    for _ in range(200):
        decisions = decide(state, now, POLICY)
        outcomes = [_outcome(event, draw(st.booleans()), now) for event in decisions if isinstance(event, TaskQueued)]
        if not decisions:
            break
        for event in decisions + outcomes:
            evolve(state, event)
            log.append(event)
        now += 1.0
    return log


def _outcome(queued: TaskQueued, success: bool, now: float):
    kind = TaskSucceeded if success else TaskFailed
    extra = {} if success else {"error": "boom"}
    return kind(dag_id=queued.dag_id, run_id=queued.run_id, task_id=queued.task_id, try_number=queued.try_number,
                runner_id="r", at=now, **extra)


def snapshot(state: SchedulerState):
    return repr(state)


@settings(max_examples=60, deadline=None)
@given(simulated_logs(), st.data())
def test_fold_in_pieces_equals_fold_at_once(log, data):
    cut = data.draw(st.integers(0, len(log)))
    in_pieces = fold(fold(SchedulerState(), log[:cut]), log[cut:])
    assert snapshot(in_pieces) == snapshot(fold(SchedulerState(), log))


@settings(max_examples=60, deadline=None)
@given(simulated_logs())
def test_replaying_the_log_again_changes_nothing(log):
    once = fold(SchedulerState(), log)
    assert snapshot(fold(fold(SchedulerState(), log), log)) == snapshot(once)


@settings(max_examples=60, deadline=None)
@given(simulated_logs())
def test_no_try_is_queued_twice_and_every_run_finishes(log):
    tries = [(event.run_id, event.task_id, event.try_number) for event in log if isinstance(event, TaskQueued)]
    assert len(tries) == len(set(tries))
    triggered = {event.request_id for event in log if isinstance(event, TriggerDagRun)}
    finished = [event.run_id for event in log if isinstance(event, DagRunFinished)]
    assert sorted(finished) == sorted(f"manual__{request}" for request in triggered)
    assert fold(SchedulerState(), log).runs == {}
