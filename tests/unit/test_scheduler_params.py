"""A trigger (or backfill) whose conf the DAG's params refuse reaches the log anyway: the owner rejects
it with the reason and creates no run; replaying the log reaches the same state."""

from __future__ import annotations

import dataclasses
import json

from schemas import CommandRejected, DagParsed, RequestBackfill, TriggerDagRun
from services.scheduler.core import decide, evolve, manual_run_id
from services.scheduler.core.evolve import fold
from services.scheduler.core.model import SchedulerState
from tests.unit.scheduler_fixtures import POLICY, parsed, state_of

PARAMS = json.dumps([{"name": "x", "schema": {"type": "integer", "maximum": 20}, "description": None, "default": 5},
                     {"name": "who", "schema": {"type": "string"}, "description": "required"}])


def with_params(event: DagParsed, params_json: str = PARAMS) -> DagParsed:
    return dataclasses.replace(event, definition=dataclasses.replace(event.definition, params_json=params_json),
                               fingerprint=event.fingerprint + "-p")


def trigger(conf: dict, request_id: str = "r1") -> TriggerDagRun:
    return TriggerDagRun(dag_id="etl", request_id=request_id, conf_json=json.dumps(conf), at=1.0)


def settle(state: SchedulerState, now: float = 10.0) -> list:
    """Decide and fold until nothing is left to decide; every decision."""
    decided: list = []
    for _ in range(20):
        events = decide(state, now, POLICY)
        if not events:
            return decided
        for event in events:
            evolve(state, event)
        decided += events
    raise AssertionError(f"decisions never settled: {decided[-10:]}")


def kinds(events: list) -> list[str]:
    return [type(event).__name__ for event in events]


def test_a_conf_that_fits_creates_the_run_with_it():
    state = state_of(with_params(parsed()), trigger({"who": "ada", "x": 7}))
    decided = settle(state)
    assert kinds(decided)[:1] == ["DagRunCreated"]
    assert json.loads(decided[0].conf_json) == {"who": "ada", "x": 7}


def test_a_conf_the_params_refuse_is_rejected_naming_the_param_and_the_rule():
    state = state_of(with_params(parsed()), trigger({"x": "abc"}))
    decided = settle(state)
    assert kinds(decided) == ["CommandRejected"]
    [rejected] = decided
    assert (rejected.command, rejected.request_id) == ("TriggerDagRun", "r1")
    assert "param 'x': 'abc' is not of type 'integer'" in rejected.reason
    assert "param 'who': required" in rejected.reason
    assert not state.triggers and not state.runs


def test_the_trigger_waits_for_its_dag_and_is_checked_against_it_whatever_the_order():
    early = state_of(trigger({"x": 99, "who": "ada"}))
    assert settle(early) == []  # no definition yet: nothing decided
    evolve(early, with_params(parsed()))
    [rejected] = settle(early)
    assert "param 'x': 99 is greater than the maximum of 20" in rejected.reason


def test_a_rejected_trigger_repeated_is_not_rejected_or_run_again():
    state = state_of(with_params(parsed()), trigger({}))
    assert kinds(settle(state)) == ["CommandRejected"]
    evolve(state, trigger({}))
    assert settle(state) == []


def test_replaying_the_log_with_the_rejection_creates_no_run_even_if_the_params_changed_since():
    log = [with_params(parsed()), trigger({"x": "abc", "who": "ada"})]
    live = state_of(*log)
    [rejected] = settle(live)
    # The DAG's params were loosened after the rejection: a replay follows the log, it does not decide again.
    replayed = fold(SchedulerState(), [*log, rejected, with_params(parsed(), "{}")])
    assert settle(replayed) == [] and not replayed.runs and not replayed.triggers


def test_a_definition_with_plain_values_for_params_accepts_any_conf():
    state = state_of(with_params(parsed(), json.dumps({"x": 5})), trigger({"x": "anything"}))
    assert kinds(settle(state))[:1] == ["DagRunCreated"]


def test_a_backfill_whose_conf_the_params_refuse_is_rejected():
    hourly = with_params(parsed(schedule="0 * * * *", start_date=1e9))
    request = RequestBackfill(dag_id="etl", request_id="bf1", start_date=0.0, end_date=3600.0,
                              conf_json=json.dumps({"x": 21, "who": "ada"}), at=1.0)
    state = state_of(hourly, request)
    decided = settle(state, now=5.0)
    assert kinds(decided) == ["CommandRejected"]
    assert isinstance(decided[0], CommandRejected) and "param 'x': 21 is greater than the maximum" in \
        decided[0].reason
    assert manual_run_id("bf1") not in {run_id for _dag, run_id in state.runs}


def test_a_conf_too_large_for_its_tries_to_carry_is_rejected_naming_its_size_however_it_came():
    """The API refuses a conf over TOCK_API_CONF_LIMIT_BYTES; a trigger from a task's TriggerDagRunOperator, or
    the CLI's, reaches the log with any size: the owner refuses one over what a try's context carries (before:
    the run was created and its tries were given "{}" for the conf, silently)."""
    from services.scheduler.core.queuing import CONF_LIMIT_BYTES

    big = {"who": "ada", "blob": "x" * CONF_LIMIT_BYTES}
    state = state_of(with_params(parsed()), trigger(big))
    [rejected] = settle(state)
    assert isinstance(rejected, CommandRejected) and rejected.command == "TriggerDagRun"
    assert f"the conf is {len(json.dumps(big)):,} bytes as JSON, over the {CONF_LIMIT_BYTES:,}" in rejected.reason
    assert not state.runs
    hourly = with_params(parsed(schedule="0 * * * *", start_date=1e9))
    backfill = RequestBackfill(dag_id="etl", request_id="bf1", start_date=0.0, end_date=3600.0,
                               conf_json=json.dumps(big), at=1.0)
    [refused] = settle(state_of(hourly, backfill), now=5.0)
    assert isinstance(refused, CommandRejected) and "over the" in refused.reason


def test_a_conf_just_within_the_limit_reaches_the_tries_whole():
    from services.scheduler.core.queuing import CONF_LIMIT_BYTES

    fits = {"who": "ada", "blob": ""}
    fits["blob"] = "x" * (CONF_LIMIT_BYTES - len(json.dumps(fits)))
    state = state_of(parsed(), trigger(fits))
    decided = settle(state)
    queued = [event for event in decided if type(event).__name__ == "TaskQueued"]
    assert kinds(decided)[:1] == ["DagRunCreated"] and queued
    assert all(json.loads(event.conf_json) == fits for event in queued)


def test_a_conf_on_which_the_params_pattern_backtracks_is_rejected_in_seconds_not_after_minutes():
    """``^(a|aa)+$`` against forty 'a' and a '!' takes Python's re minutes; the owner's decision turn would stall
    on it. Matched within PATTERN_SECONDS (schemas/patterns.py), the trigger is rejected saying why."""
    params = json.dumps([{"name": "word", "schema": {"type": "string", "pattern": "^(a|aa)+$"}, "description": None,
                          "default": "aa"}])
    state = state_of(with_params(parsed(), params), trigger({"word": "a" * 40 + "!"}))
    [rejected] = settle(state)
    assert isinstance(rejected, CommandRejected)
    assert "param 'word': matching '^(a|aa)+$' against 'aaaa" in rejected.reason and "took over 1 s" in rejected.reason
    fine = state_of(with_params(parsed(), params), trigger({"word": "a" * 40}, request_id="r2"))
    assert kinds(settle(fine))[:1] == ["DagRunCreated"]
