"""The deadline heaps answer exactly what a scan of every live and waiting try answers.

Given random lives of a few tries (queued, launched, started, heartbeats — some read before
their TaskStarted —, adopted, ended, retried, queued again) interleaved with queries at random
times, ``overdue_tries``, ``next_wakeup`` and ``due_retries`` equal the scans they replaced.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import TaskAdopted, TaskRetryScheduled
from services.scheduler.core import SchedulerState, evolve, next_wakeup, overdue_tries, reindex_timers, silence_deadline
from services.scheduler.core.liveness import due_retries
from services.scheduler.core.model import ACTIVE
from tests.unit.scheduler_fixtures import created, failed, heartbeat, launched, parsed, queued, started, succeeded

TASKS = ("a", "b", "c")
TIMEOUT = 30.0


# -- the scans the heaps replaced (the oracle) --------------------------------------------------

def scanned_overdue(state, at, timeout, reachable_since, start_timeout):
    overdue = set()
    for key in state.live:
        instance = state.instance(key)
        if instance is None or instance.state not in ACTIVE:
            continue
        deadline = silence_deadline(instance, timeout, start_timeout)
        if deadline is not None and at > max(deadline, reachable_since + timeout):
            overdue.add(key)
    return overdue


def scanned_wakeup(state, timeout, now, start_timeout):
    times = [instance.not_before for key in state.waiting
             if (instance := state.instance(key)) is not None and instance.not_before is not None]
    times += [deadline for key in state.live
              if (instance := state.instance(key)) is not None
              and (deadline := silence_deadline(instance, timeout, start_timeout)) is not None]
    return min((time for time in times if time > now), default=None)


def scanned_retries(state, now):
    return {key for key in state.waiting
            if (instance := state.instance(key)) is not None and now >= (instance.not_before or 0.0)}


# -- random lives ---------------------------------------------------------------------------------

def _step(draw, state: SchedulerState, at: float):
    """One event about a random task, fitting its current state more often than not."""
    task_id = draw(st.sampled_from(TASKS))
    instance = state.instance(("etl", "manual__r1", task_id))
    try_number = instance.try_number if instance and instance.try_number else 1
    kind = draw(st.sampled_from(["queue", "launch", "start", "beat", "beat", "beat", "adopt", "succeed",
                                 "fail", "retry"]))
    if kind == "queue":
        return queued(task_id, try_number + (1 if instance and instance.try_number else 0), at=at)
    if kind == "launch":
        return launched(task_id, try_number, at=at)
    if kind == "start":
        return started(task_id, try_number, at=at)
    if kind == "beat":
        return heartbeat(task_id, try_number, at=at)
    if kind == "adopt":
        return TaskAdopted(dag_id="etl", run_id="manual__r1", task_id=task_id, try_number=try_number, handle="",
                           by_scheduler="sched-b", from_scheduler="sched-a", at=at)
    if kind == "succeed":
        return succeeded(task_id, try_number, at=at)
    if kind == "fail":
        return failed(task_id, try_number, at=at)
    return TaskRetryScheduled(dag_id="etl", run_id="manual__r1", task_id=task_id, try_number=try_number,
                              next_try_number=try_number + 1, not_before=at + draw(st.sampled_from([0.0, 5.0, 40.0])),
                              at=at)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([None, 10.0, 30.0, 120.0]), st.booleans())
def test_heaps_answer_what_a_scan_of_every_try_answers(data, start_timeout, restore_midway):
    state = SchedulerState()
    for event in (parsed(edges={task: [] for task in TASKS}, retries=3), created()):
        evolve(state, event)
    at = 1.0
    for step in range(data.draw(st.integers(1, 60))):
        at += data.draw(st.sampled_from([0.0, 0.5, 3.0, 12.0, 31.0]))
        evolve(state, _step(data.draw, state, at))
        if restore_midway and step == 10:
            reindex_timers(state)  # as after a snapshot was restored: the heaps are rebuilt
        for _query in range(data.draw(st.integers(0, 2))):
            now = at + data.draw(st.sampled_from([-20.0, 0.0, 9.9, 10.0, 29.0, 30.0, 31.0, 60.0, 200.0]))
            reachable_since = data.draw(st.sampled_from([0.0, at - 40.0, at]))
            assert overdue_tries(state, now, TIMEOUT, reachable_since, start_timeout) == \
                scanned_overdue(state, now, TIMEOUT, reachable_since, start_timeout)
            assert next_wakeup(state, TIMEOUT, now, start_timeout) == scanned_wakeup(state, TIMEOUT, now, start_timeout)
            assert due_retries(state, now) == scanned_retries(state, now)


def test_the_heaps_hold_no_more_than_a_few_entries_per_try_however_many_heartbeats():
    state = SchedulerState()
    for event in (parsed(edges={"a": []}), created(), queued("a", at=1.0), launched("a", at=2.0),
                  started("a", at=3.0)):
        evolve(state, event)
    for second in range(4, 5_000):
        evolve(state, heartbeat("a", at=float(second)))
        overdue_tries(state, float(second) + 1.0, TIMEOUT)
        next_wakeup(state, TIMEOUT, float(second) + 1.0)
    assert len(state.timers.silence.heap) + len(state.timers.silence.passed) <= 2
    assert overdue_tries(state, 5_000.0 + TIMEOUT + 1.0, TIMEOUT) == {("etl", "manual__r1", "a")}
