"""A sensor's wait, decided by the owner from the log (issue 24): given the events of its pokes, the
decisions it writes (TaskRescheduled: the next poke and when; SensorTimedOut: failed or skipped), and
that a replay of the log waits the same. Pokes use none of the task's retries."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    DagParsed,
    SensorDefinition,
    SensorTimedOut,
    TaskDefinition,
    TaskPoked,
    TaskRescheduled,
    TaskRetryScheduled,
)
from schemas.sensors import next_poke
from services.scheduler.core import decide, fold
from services.scheduler.core.model import POKED, UP_FOR_RETRY
from tests.unit.limits_fixtures import dag, failed, queued, queued_now, run, started, state_of, succeeded
from tests.unit.scheduler_fixtures import POLICY

T = TypeVar("T")


def sensing(retries: int = 0, **settings: Any) -> DagParsed:
    """The DAG: sensor ``wait`` (poke interval 10 s unless said), then task ``after``."""
    parsed = dag({"after": ["wait"]})
    wait = TaskDefinition(task_id="wait", kind="sensor", retries=retries,
                          sensor=SensorDefinition(**{"poke_interval": 10.0, **settings}))
    return replace(parsed, definition=replace(parsed.definition, tasks=[wait, *parsed.definition.tasks]))


def the_one(kind: type[T], events: list[Any]) -> T:
    [found] = [event for event in events if isinstance(event, kind)]
    return found


def poked(try_number: int, at: float, reschedule_at: float | None = None, timed_out: bool = False) -> TaskPoked:
    return TaskPoked(dag_id="etl", run_id="r1", task_id="wait", try_number=try_number,
                     runner_id=f"r-r1-wait-{try_number}", reschedule_at=reschedule_at, timed_out=timed_out, at=at)


def poke(try_number: int, start: float, reschedule_at: float | None = None, timed_out: bool = False) -> list[Any]:
    """One poke not met: its try queued, started at ``start`` and poked a second later."""
    return [queued("r1", "wait", try_number, at=start - 1), started("r1", "wait", try_number, at=start),
            poked(try_number, start + 1, reschedule_at, timed_out)]


def test_a_poke_not_met_ends_its_try_and_the_owner_writes_the_next_poke():
    state = state_of(sensing(), run("r1", 0.0), *poke(1, 100.0))
    assert state.runs["etl", "r1"].tasks["wait"].state == POKED
    assert not state.live and not state.unlaunched  # nothing held: no try, no slot
    [decision] = decide(state, 102.0, POLICY)
    assert decision == TaskRescheduled(dag_id="etl", run_id="r1", task_id="wait", try_number=1, next_try_number=2,
                                       not_before=111.0, waiting_since=100.0, poke=1, at=102.0)


def test_the_next_poke_is_queued_when_its_timer_is_due_not_before():
    log = [sensing(), run("r1", 0.0), *poke(1, 100.0)]
    [decision] = decide(state_of(*log), 102.0, POLICY)
    state = state_of(*log, decision)  # a replay (or a takeover) folds the decision: it does not decide again
    assert state.runs["etl", "r1"].tasks["wait"].state == UP_FOR_RETRY
    assert queued_now(state, 110.9) == []
    assert queued_now(state, 111.0) == [("r1", "wait")]


def test_the_wait_keeps_its_start_and_count_across_pokes():
    log = [sensing(), run("r1", 0.0), *poke(1, 100.0)]
    for number, start in ((2, 111.0), (3, 122.0)):
        [decision] = decide(state_of(*log), start - 9, POLICY)
        log += [decision, *poke(number, start)]
    [third] = decide(state_of(*log), 124.0, POLICY)
    assert isinstance(third, TaskRescheduled)
    assert (third.waiting_since, third.poke, third.next_try_number) == (100.0, 3, 4)


@pytest.mark.parametrize("soft_fail, state", [(False, "failed"), (True, "skipped")])
def test_a_poke_not_met_past_the_timeout_ends_the_sensor(soft_fail, state):
    log = [sensing(timeout=30.0, soft_fail=soft_fail), run("r1", 0.0), *poke(1, 100.0)]
    [first] = decide(state_of(*log), 102.0, POLICY)
    log += [first, *poke(2, 120.0)]
    [second] = decide(state_of(*log), 122.0, POLICY)
    assert isinstance(second, TaskRescheduled) and second.not_before == 130.0  # the last poke comes at the timeout
    log += [second, *poke(3, 130.0)]
    ended = the_one(SensorTimedOut, decide(state_of(*log), 132.0, POLICY))
    assert ended == SensorTimedOut(dag_id="etl", run_id="r1", task_id="wait", try_number=3, state=state,
                                   waited=31.0, timeout=30.0, at=132.0)
    decided = decide(state_of(*log), 132.0, POLICY)  # not retried; what is downstream follows its state
    assert not any(isinstance(event, TaskRetryScheduled) for event in decided)
    assert state_of(*log, decided[0]).runs["etl", "r1"].tasks["wait"].state == state
    after = "TaskUpstreamFailed" if state == "failed" else "TaskSkipped"
    assert [type(event).__name__ for event in decided] == ["SensorTimedOut", after, "DagRunFinished"]


def test_a_sensor_in_poke_mode_that_waited_its_timeout_in_its_try_ends_at_once():
    log = [sensing(mode="poke", timeout=3600.0), run("r1", 0.0), *poke(1, 100.0, timed_out=True)]
    assert the_one(SensorTimedOut, decide(state_of(*log), 102.0, POLICY)).state == "failed"


def test_a_poke_may_ask_for_its_next_moment():
    log = [sensing(timeout=1000.0), run("r1", 0.0), *poke(1, 100.0, reschedule_at=500.0)]
    [decision] = decide(state_of(*log), 102.0, POLICY)
    assert isinstance(decision, TaskRescheduled) and decision.not_before == 500.0


def test_a_met_poke_succeeds_and_the_downstream_runs():
    log = [sensing(), run("r1", 0.0), *poke(1, 100.0)]
    [decision] = decide(state_of(*log), 102.0, POLICY)
    log += [decision, queued("r1", "wait", 2, at=111.0), started("r1", "wait", 2, at=112.0),
            succeeded("r1", "wait", 2, at=113.0)]
    assert queued_now(state_of(*log), 114.0) == [("r1", "after")]


def test_pokes_use_none_of_the_retries_and_a_retry_waits_anew():
    log = [sensing(retries=1, timeout=50.0), run("r1", 0.0)]
    start = 100.0
    for number in (1, 2, 3):  # three pokes not met
        log += poke(number, start)
        [decision] = decide(state_of(*log), start + 2, POLICY)
        log.append(decision)
        start = decision.not_before
    log += [queued("r1", "wait", 4, at=start), started("r1", "wait", 4, at=start + 1),
            failed("r1", "wait", 4, at=start + 2)]  # the fourth try fails: its first use of a retry
    [retry] = decide(state_of(*log), start + 3, POLICY)
    assert isinstance(retry, TaskRetryScheduled) and retry.next_try_number == 5
    log += [retry, *poke(5, retry.not_before + 1)]
    [after_retry] = decide(state_of(*log), retry.not_before + 3, POLICY)
    assert isinstance(after_retry, TaskRescheduled)
    assert (after_retry.waiting_since, after_retry.poke) == (retry.not_before + 1, 1)  # a new wait


def test_a_poke_from_a_runner_that_lost_the_claim_changes_nothing():
    log = [sensing(), run("r1", 0.0), queued("r1", "wait", 1, at=99.0), started("r1", "wait", 1, at=100.0)]
    stray = TaskPoked(dag_id="etl", run_id="r1", task_id="wait", try_number=1, runner_id="someone-else", at=101.0)
    assert state_of(*log, stray).runs["etl", "r1"].tasks["wait"].state == "running"


# -- the rule itself ---------------------------------------------------------------------------

def test_exponential_backoff_doubles_the_interval_up_to_max_wait():
    sensor = SensorDefinition(poke_interval=10.0, exponential_backoff=True, max_wait=60.0, timeout=10_000.0)
    assert [next_poke(sensor, number, 0.0, 0.0) for number in (1, 2, 3, 4, 5)] == [10.0, 20.0, 40.0, 60.0, 60.0]


@given(st.floats(0.1, 1e5), st.floats(0.0, 1e6), st.integers(1, 10_000), st.floats(0.0, 1e6), st.booleans(),
       st.one_of(st.none(), st.floats(0.0, 2e6)))
def test_the_next_poke_is_never_before_now_nor_past_the_timeout(interval, timeout, number, waited, backoff, asked):
    sensor = SensorDefinition(poke_interval=interval, timeout=timeout, exponential_backoff=backoff)
    since = 1000.0
    at = since + waited
    waited = at - since  # as the rule sees it (floating point)
    then = next_poke(sensor, number, at, since, asked)
    if waited >= timeout:
        assert then is None
    else:
        assert then is not None and at <= then <= since + timeout
