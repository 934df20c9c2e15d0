"""A sensor's callbacks in the monitor (issue 24): its pokes are tries but no retries, so a failure after
pokes still has its retry (owed "retry", not "failure"); its timeout owes "failure", or "skipped" with
soft_fail; a poke not met owes nothing but the try's "execute"."""

from __future__ import annotations

import pytest

from schemas import SensorTimedOut, TaskFailed, TaskPoked, TaskRescheduled, TaskRetryScheduled
from tests.unit.test_monitor_task_callbacks import IDS, T0, created, owed_of, parsed, queued, started


def poke(number: int) -> list:
    at = T0 + 10 * number
    return [queued(number, at), started(number, f"r{number}", at + 1),
            TaskPoked(**IDS, try_number=number, runner_id=f"r{number}", at=at + 2),
            TaskRescheduled(**IDS, try_number=number, next_try_number=number + 1, not_before=at + 10,
                            waiting_since=T0 + 11, poke=number, at=at + 3)]


def test_a_failure_after_pokes_still_has_its_retry():
    failing = [queued(4, T0 + 50), started(4, "r4", T0 + 51),
               TaskFailed(**IDS, try_number=4, runner_id="r4", error="boom", at=T0 + 52),
               TaskRetryScheduled(**IDS, try_number=4, next_try_number=5, not_before=T0 + 60, at=T0 + 53)]
    owed = owed_of([parsed(retries=1, task_triggers=("failure", "retry")), created(), *poke(1), *poke(2), *poke(3),
                    *failing])
    assert [(trigger, number) for trigger, _task, number, _state in owed] == [("retry", 4)]


@pytest.mark.parametrize("state, trigger", [("failed", "failure"), ("skipped", "skipped")])
def test_the_timeout_owes_failure_or_skipped(state, trigger):
    last = poke(1)[:3]
    ended = SensorTimedOut(**IDS, try_number=1, state=state, waited=61.0, timeout=60.0, at=T0 + 14)
    owed = owed_of([parsed(retries=3, task_triggers=("failure", "skipped", "retry")), created(), *last, ended])
    assert [(kind, number, owed_state) for kind, _task, number, owed_state in owed] == [(trigger, 1, state)]


def test_a_poke_not_met_owes_only_its_execute():
    owed = owed_of([parsed(), created(), *poke(1)])
    assert [trigger for trigger, *_rest in owed] == ["execute"]
