"""Poison input never stops a partition: given these events, the scheduler core folds and decides
without raising. Cron arithmetic with no answer is "no run"; a backfill past the calendar is
refused; whatever still raises for one DAG quarantines that DAG, and the others go on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from schemas import (
    BackfillPlanned,
    CommandRejected,
    DagParsed,
    DagQuarantined,
    DagQuarantineLifted,
    DagRunCreated,
    RequestBackfill,
    TaskDefinition,
    TaskQueued,
    TriggerDagRun,
)
from services.scheduler.core import SchedulerState, decide, evolve, fold
from services.scheduler.core.model import DagTombstone
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import POLICY, parsed, state_of

NOW = datetime(2025, 6, 1, 12, 30, tzinfo=UTC).timestamp()


def moment(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def healthy() -> DagParsed:
    return parsed("healthy", schedule="@hourly", start_date=moment(2025, 1, 1))


def kinds(events) -> list[str]:
    return [f"{type(event).__name__}:{event.dag_id}" for event in events]


def decide_and_fold(state: SchedulerState, now: float = NOW) -> list:
    decisions = decide(state, now, POLICY)
    fold(state, decisions)
    return decisions


NEVER_DUE = {
    "a schedule that never fires": {"schedule": "0 0 30 2 *"},
    "a start date of year 1": {"schedule": "@daily", "start_date": moment(1, 1, 1)},
    "@yearly from 9999-12-31": {"schedule": "@yearly", "start_date": moment(9999, 12, 31)},
}


@pytest.mark.parametrize("case", sorted(NEVER_DUE))
def test_a_poisoned_schedule_folds_and_the_healthy_dag_beside_it_runs(case):
    state = state_of(parsed("poison", **NEVER_DUE[case]), healthy())
    assert not state.quarantined
    decisions = decide_and_fold(state)
    assert "DagRunCreated:healthy" in kinds(decisions)
    assert all(event.dag_id == "healthy" or case == "a start date of year 1" for event in decisions)
    assert "TaskQueued:healthy" in kinds(decide_and_fold(state))


@pytest.mark.parametrize("case", ["a schedule that never fires", "@yearly from 9999-12-31"])
def test_a_schedule_with_no_fire_time_left_is_no_run_due(case):
    state = state_of(parsed("poison", **NEVER_DUE[case]))
    assert state.next_due["poison"] is None
    assert decide(state, NOW, POLICY) == []


def test_a_start_on_the_calendars_first_day_runs_like_any_other():
    state = state_of(parsed("poison", **NEVER_DUE["a start date of year 1"]))
    assert [(type(event), event.logical_date) for event in decide(state, NOW, POLICY)] == [
        (DagRunCreated, moment(2025, 6, 1))]


def test_a_backfill_running_past_year_9999_is_refused_naming_why():
    yearly = parsed("poison", schedule="@yearly", start_date=moment(2000, 1, 1))
    request = RequestBackfill(dag_id="poison", request_id="b1", start_date=moment(9999, 6, 1),
                              end_date=moment(9999, 12, 29), at=NOW)
    state = state_of(yearly, healthy(), request)
    decisions = decide_and_fold(state)
    rejected = [event for event in decisions if isinstance(event, CommandRejected)]
    assert [(event.request_id, event.command) for event in rejected] == [("b1", "RequestBackfill")]
    assert "past the calendar" in rejected[0].reason
    assert "DagRunCreated:healthy" in kinds(decisions)
    assert not [event for event in decide(state, NOW, POLICY) if isinstance(event, CommandRejected | BackfillPlanned)]


@pytest.mark.parametrize("start, end", [(float("nan"), moment(2025, 1, 1)), (-1e300, 1e300),
                                        (moment(2025, 1, 1), float("inf"))])
def test_a_backfill_with_dates_outside_the_calendar_is_refused(start, end):
    daily = parsed("etl", schedule="@daily", start_date=moment(2000, 1, 1))
    request = RequestBackfill(dag_id="etl", request_id="b1", start_date=start, end_date=end, at=NOW)
    rejected = [event for event in decide(state_of(daily, request), NOW, POLICY)
                if isinstance(event, CommandRejected)]
    assert len(rejected) == 1 and "outside the calendar" in rejected[0].reason


@pytest.mark.parametrize("logical_date", [float("nan"), 1e300, -1e300])
def test_a_trigger_with_a_logical_date_outside_the_calendar_is_refused(logical_date):
    state = state_of(parsed("etl"), TriggerDagRun(dag_id="etl", request_id="q1", logical_date=logical_date, at=NOW))
    decisions = decide_and_fold(state)
    assert [(type(event), event.request_id) for event in decisions] == [(CommandRejected, "q1")]
    assert "outside the calendar" in decisions[0].reason
    evolve(state, TriggerDagRun(dag_id="etl", request_id="q1", logical_date=logical_date, at=NOW))
    assert decide(state, NOW, POLICY) == []


# -- quarantine --------------------------------------------------------------------------------

def broken_fold() -> DagParsed:
    """A definition the fold raises on: a task whose upstream is None where a list is declared (no
    codec writes that; it stands for any handler bug left)."""
    good = parsed("poison", schedule="@hourly", start_date=moment(2025, 1, 1))
    task = TaskDefinition(task_id="a", kind="bash", command="true", upstream=None)  # type: ignore[arg-type]
    return replace(good, fingerprint="fp-broken", definition=replace(good.definition, tasks=[task]))


def broken_decision() -> DagParsed:
    """A definition the fold takes and deciding raises on (max_active_runs None where an int is declared)."""
    good = parsed("poison", schedule="@hourly", start_date=moment(2025, 1, 1))
    return replace(good, fingerprint="fp-undecidable",
                   definition=replace(good.definition, max_active_runs=None))  # type: ignore[arg-type]


def fixed() -> DagParsed:
    return replace(parsed("poison", schedule="@hourly", start_date=moment(2025, 1, 1)), fingerprint="fp-fixed")


def test_a_dag_whose_fold_raises_is_quarantined_and_the_other_dag_still_gets_runs_and_tries():
    state = state_of(healthy(), broken_fold())
    assert state.quarantined["poison"].fingerprint == "fp-broken"
    assert "folding DagParsed raised TypeError" in state.quarantined["poison"].reason
    decisions = decide_and_fold(state)
    assert kinds(decisions) == ["DagQuarantined:poison", "DagRunCreated:healthy"]
    quarantined = decisions[0]
    assert (quarantined.fingerprint, quarantined.file_path) == ("fp-broken", "/dags/poison.py")
    evolve(state, TriggerDagRun(dag_id="poison", request_id="q1", at=NOW))
    assert kinds(decide_and_fold(state)) == ["TaskQueued:healthy"]  # announced once; nothing for poison


def test_a_dag_whose_decision_raises_is_quarantined_and_the_other_dag_still_gets_runs_and_tries():
    state = state_of(healthy(), broken_decision(), TriggerDagRun(dag_id="poison", request_id="q1", at=NOW))
    decisions = decide_and_fold(state)
    assert kinds(decisions) == ["DagRunCreated:healthy", "DagQuarantined:poison"]
    assert "deciding raised TypeError" in decisions[1].reason and decisions[1].fingerprint == "fp-undecidable"
    assert state.quarantined["poison"].fingerprint == "fp-undecidable"
    assert kinds(decide_and_fold(state)) == ["TaskQueued:healthy"]


def test_a_definition_with_another_fingerprint_lifts_the_quarantine_once():
    state = state_of(healthy(), broken_fold())
    decide_and_fold(state)
    evolve(state, fixed())
    decisions = decide_and_fold(state)
    assert kinds(decisions)[0] == "DagQuarantineLifted:poison"
    assert decisions[0].fingerprint == "fp-broken"
    assert "DagRunCreated:poison" in kinds(decisions)
    assert not state.quarantined and not state.announced
    assert not [event for event in decide(state, NOW, POLICY)
                if isinstance(event, DagQuarantined | DagQuarantineLifted)]


def test_the_same_definition_again_keeps_the_quarantine():
    state = state_of(healthy(), broken_decision())
    decide_and_fold(state)
    evolve(state, broken_decision())
    assert "poison" in state.quarantined
    assert [event for event in decide(state, NOW, POLICY) if event.dag_id == "poison"] == []


def test_deleting_a_quarantined_dag_lifts_its_quarantine():
    state = state_of(healthy(), broken_fold())
    decide_and_fold(state)
    evolve(state, DagTombstone("poison"))
    assert kinds(decide_and_fold(state))[0] == "DagQuarantineLifted:poison"
    assert not state.announced


def replay_order(log: list) -> list:
    """How a takeover replays a partition: tock.dags first, then tock.events."""
    return [event for event in log if isinstance(event, DagParsed | DagTombstone)] + [
        event for event in log if not isinstance(event, DagParsed | DagTombstone)]


@pytest.mark.parametrize("poison", [broken_fold, broken_decision])
def test_a_replay_reaches_the_same_quarantine_and_decides_nothing_more(poison):
    log = [healthy(), poison(), TriggerDagRun(dag_id="poison", request_id="q1", at=NOW)]
    live = fold(SchedulerState(), log)
    for _ in range(3):
        decisions = decide(live, NOW, POLICY)
        fold(live, decisions)
        log += decisions
    replayed = fold(SchedulerState(), replay_order(log))
    assert replayed.quarantined == live.quarantined and replayed.announced == live.announced
    assert [event for event in decide(replayed, NOW, POLICY) if event.dag_id == "poison"] == []


def test_a_replay_after_the_fix_lifts_a_quarantine_announced_before_it():
    log = [healthy(), broken_decision()]
    state = fold(SchedulerState(), log)
    log += decide_and_fold(state)
    log.append(fixed())  # the owner crashed before deciding on the fix: the lift is still owed
    replayed = fold(SchedulerState(), replay_order(log))
    assert not replayed.quarantined
    assert kinds(decide(replayed, NOW, POLICY))[0] == "DagQuarantineLifted:poison"


def test_a_snapshot_carries_the_quarantine():
    state = state_of(healthy(), broken_fold())
    decide_and_fold(state)
    evolve(state, broken_decision())  # another definition, quarantined too: announced differs from held
    restored = decode_snapshot(encode_snapshot(Snapshot(0, state, {"dags": 1}))).state
    assert restored.quarantined == state.quarantined and restored.announced == state.announced
    assert decide(restored, NOW, POLICY) == decide(state, NOW, POLICY)


def test_no_try_of_a_quarantined_dag_is_queued():
    state = state_of(healthy(), parsed("poison"), TriggerDagRun(dag_id="poison", request_id="q1", at=NOW))
    decide_and_fold(state)  # the run is created
    evolve(state, broken_decision())
    decisions = decide_and_fold(state)
    assert not [event for event in decisions if isinstance(event, TaskQueued) and event.dag_id == "poison"]
    assert "DagQuarantined:poison" in kinds(decisions)
