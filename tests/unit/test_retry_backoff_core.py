"""Retry backoff (issue 23): with retry_exponential_backoff the delay before a retry grows as Airflow's
does (base retry_delay * 2 ** (try - 1), a jitter from the try's identity, at most a day and at most
max_retry_delay), the same on every scheduler; the decision is written in TaskRetryScheduled."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import TaskDefinition, TaskRetryScheduled
from services.scheduler.core import decide, fold
from services.scheduler.core.model import UP_FOR_RETRY
from services.scheduler.core.retries import MOST_BACKOFF, retry_delay
from tests.unit.limits_fixtures import dag, failed, queued, queued_now, run, state_of
from tests.unit.scheduler_fixtures import POLICY


def task(retry_delay_seconds: float = 10.0, backoff: bool = True, most: float | None = None) -> TaskDefinition:
    return TaskDefinition(task_id="a", kind="bash", retry_delay=retry_delay_seconds,
                          retry_exponential_backoff=backoff, max_retry_delay=most)


def test_without_backoff_the_delay_is_the_retry_delay():
    assert [retry_delay(task(7.5, backoff=False), "etl", "r1", number) for number in (1, 2, 9)] == [7.5] * 3


@pytest.mark.parametrize("try_number", [1, 2, 3, 4, 5])
def test_the_delay_doubles_with_each_try_with_a_jitter_below_the_base(try_number):
    base = 10 * 2 ** (try_number - 1)
    delay = retry_delay(task(10.0), "etl", "r1", try_number)
    assert base <= delay < 2 * base and delay == int(delay)


def test_the_jitter_comes_from_the_tries_identity_so_every_scheduler_waits_the_same():
    delays = {run_id: retry_delay(task(60.0), "etl", run_id, 3) for run_id in ("r1", "r2", "r3", "r4")}
    assert delays == {run_id: retry_delay(task(60.0), "etl", run_id, 3) for run_id in delays}
    assert len(set(delays.values())) > 1  # tries of different runs spread out


@pytest.mark.parametrize("seconds, try_number, most, expected", [
    (10.0, 8, 60.0, 60.0),                 # max_retry_delay caps it
    (10.0, 1, 3600.0, None),              # below the cap: untouched
    (3600.0, 30, None, float(MOST_BACKOFF)),  # at most a day without a cap (Airflow's MAX_RETRY_DELAY)
    (1.0, 10**6, None, float(MOST_BACKOFF)),  # a try number cleared up without bound does not overflow
    (0.0, 1, None, 1.0),                   # a zero delay backs off from one second, as Airflow's
    (10.0, 3, 0.0, None),                  # max_retry_delay 0 is no cap (Airflow reads it as unset)
])
def test_the_delay_is_bounded(seconds, try_number, most, expected):
    delay = retry_delay(task(seconds, most=most), "etl", "r1", try_number)
    uncapped = retry_delay(task(seconds), "etl", "r1", try_number)
    assert delay == (uncapped if expected is None else expected)


@given(st.floats(0.0, 1e6), st.integers(1, 200), st.one_of(st.none(), st.floats(1.0, 1e5)))
def test_the_delay_is_always_a_finite_number_within_its_bounds(seconds, try_number, most):
    delay = retry_delay(task(seconds, most=most), "etl", "r1", try_number)
    assert math.isfinite(delay) and 0 < delay <= min(MOST_BACKOFF, most or MOST_BACKOFF)


# -- decided and written -----------------------------------------------------------------------

OPTIONS = {"a": {"retries": 3, "retry_delay": 10.0, "retry_exponential_backoff": True, "max_retry_delay": 30.0}}


def test_the_retry_is_scheduled_with_its_backoff_written_in_the_event():
    state = state_of(dag({"a": []}, task_options=OPTIONS), run("r1", 100.0))
    delays = []
    for number in (1, 2, 3):
        fold(state, [queued("r1", "a", number, at=10.0 * number), failed("r1", "a", number, at=10.0 * number + 1)])
        [scheduled] = decide(state, 10.0 * number + 2, POLICY)
        assert isinstance(scheduled, TaskRetryScheduled)
        assert scheduled.not_before == 10.0 * number + 1 + scheduled.delay
        assert scheduled.delay == retry_delay(state.dags["etl"].tasks["a"], "etl", "r1", number)
        delays.append(scheduled.delay)
        fold(state, [scheduled])
    assert 10 <= delays[0] < 20 and 20 <= delays[1] < 40 and delays[2] == 30.0  # the third capped


def test_the_retry_waits_until_the_delay_written_in_the_log():
    log = [dag({"a": []}, task_options=OPTIONS), run("r1", 100.0), queued("r1", "a", at=10.0),
           failed("r1", "a", at=11.0)]
    [scheduled] = decide(state_of(*log), 12.0, POLICY)
    replayed = state_of(*log, scheduled)  # a takeover folds the decision, it does not decide again
    assert replayed.runs["etl", "r1"].tasks["a"].state == UP_FOR_RETRY
    assert queued_now(replayed, scheduled.not_before - 0.5) == []
    assert queued_now(replayed, scheduled.not_before) == [("r1", "a")]
