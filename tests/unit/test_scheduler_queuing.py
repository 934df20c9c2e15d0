"""What a queued try records of its context: given these events, the TaskQueued decided carries the
run's dates and conf, the params resolved for it, and which upstream try's values it reads."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from schemas import (
    ClearTask,
    DagRunCreated,
    DagRunFinished,
    TaskCleared,
    TaskQueued,
    TryInput,
)
from services.scheduler.core import decide
from services.scheduler.core.queuing import INPUTS_LIMIT_BYTES
from tests.unit.scheduler_fixtures import ME, POLICY, RUN, created, parsed, queued, started, state_of, succeeded

VALUE = json.dumps({"return_value": {"total": 3}})


def _queued_of(events: list, task_id: str) -> TaskQueued:
    [found] = [event for event in events if isinstance(event, TaskQueued) and event.task_id == task_id]
    return found


def _ran(task_id: str, values_json: str = "", try_number: int = 1, run_id: str = RUN) -> list:
    return [queued(task_id, try_number, run_id=run_id), started(task_id, try_number),
            succeeded(task_id, try_number, values_json=values_json, run_id=run_id)]


def _with_params(parsed_event, dag_params: dict, task_params: dict | None = None):
    definition = parsed_event.definition
    tasks = [replace(task, params_json=json.dumps(task_params or {})) for task in definition.tasks]
    return replace(parsed_event, definition=replace(definition, params_json=json.dumps(dag_params), tasks=tasks))


def test_a_downstream_try_records_the_upstream_try_whose_values_it_reads():
    state = state_of(parsed(edges={"extract": [], "load": ["extract"]}), created(), *_ran("extract", VALUE))
    assert _queued_of(decide(state, now=7.0, policy=POLICY), "load").inputs == [
        TryInput(task_id="extract", try_number=1, values_json=VALUE)]


def test_an_upstream_that_passed_nothing_is_not_an_input():
    state = state_of(parsed(edges={"a": [], "b": ["a"]}), created(), *_ran("a"))
    assert _queued_of(decide(state, now=7.0, policy=POLICY), "b").inputs == []


def test_a_cleared_upstream_passes_the_values_of_its_new_try():
    given = [parsed(edges={"a": [], "b": ["a"]}), created(), *_ran("a", VALUE), *_ran("b"),
             ClearTask(dag_id="etl", run_id=RUN, task_id="a", request_id="c1", downstream=True, at=8.0),
             TaskCleared(dag_id="etl", run_id=RUN, task_id="a", try_number=1, request_id="c1", at=8.5),
             TaskCleared(dag_id="etl", run_id=RUN, task_id="b", try_number=1, request_id="c1", at=8.5),
             *_ran("a", json.dumps({"return_value": 2}), try_number=2)]
    [input_] = _queued_of(decide(state_of(*given), now=9.0, policy=POLICY), "b").inputs
    assert (input_.try_number, input_.values_json) == (2, json.dumps({"return_value": 2}))


def test_the_context_holds_the_runs_dates_conf_and_params_resolved():
    given = [_with_params(parsed(), {"x": 1, "y": "d"}, {"y": "task"}),
             replace(created(), conf_json=json.dumps({"x": 5}))]
    event = _queued_of(decide(state_of(*given), now=7.0, policy=POLICY), "a")
    assert (event.run_type, event.logical_date, event.conf_json) == ("manual", 1.0, json.dumps({"x": 5}))
    assert json.loads(event.params_json) == {"x": 5, "y": "task"}


def test_a_scheduled_run_of_a_cron_schedule_covers_the_interval_since_the_previous_fire_time():
    day = datetime(2026, 3, 2, tzinfo=UTC).timestamp()
    given = [parsed(schedule="@daily", start_date=day - 5 * 86_400),
             DagRunCreated(dag_id="etl", run_id="scheduled__x", logical_date=day, run_type="scheduled",
                           dag_fingerprint="fp", scheduler_id=ME, at=day)]
    event = _queued_of(decide(state_of(*given), now=day + 1, policy=POLICY), "a")
    assert (event.data_interval_start, event.data_interval_end) == (day - 86_400, day)


def test_a_manual_run_has_an_empty_interval_at_its_logical_date():
    event = _queued_of(decide(state_of(parsed(schedule="@daily"), created(at=50.0)), now=60.0, policy=POLICY), "a")
    assert (event.data_interval_start, event.data_interval_end) == (50.0, 50.0)


def test_the_previous_successful_run_is_recorded():
    first, second = "manual__1", "manual__2"
    given = [parsed(), created(run_id=first, at=10.0), *_ran("a", run_id=first),
             DagRunFinished(dag_id="etl", run_id=first, state="success", at=11.0), created(run_id=second, at=20.0)]
    event = _queued_of(decide(state_of(*given), now=21.0, policy=POLICY), "a")
    assert (event.prev_data_interval_start_success, event.prev_data_interval_end_success) == (10.0, 10.0)


def test_no_previous_success_records_none():
    event = _queued_of(decide(state_of(parsed(), created()), now=7.0, policy=POLICY), "a")
    assert (event.prev_data_interval_start_success, event.prev_data_interval_end_success) == (None, None)


def test_inputs_past_the_limit_are_recorded_by_provenance_only():
    big = json.dumps({"return_value": "x" * (INPUTS_LIMIT_BYTES // 2 + 10)})
    given = [parsed(edges={"a": [], "b": [], "c": ["a", "b"]}), created(), *_ran("a", big), *_ran("b", big)]
    inputs = _queued_of(decide(state_of(*given), now=7.0, policy=POLICY), "c").inputs
    assert [(item.task_id, item.left_out, bool(item.values_json)) for item in inputs] == [
        ("a", False, True), ("b", True, False)]


def test_a_conf_that_is_not_an_object_leaves_the_params_the_dags():
    given = [_with_params(parsed(), {"x": 1}), replace(created(), conf_json="[1, 2]")]
    assert json.loads(_queued_of(decide(state_of(*given), now=7.0, policy=POLICY), "a").params_json) == {"x": 1}
