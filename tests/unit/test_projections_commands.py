"""The command and backfill read models: given these events, then these rows."""

from __future__ import annotations

import json

import pytest

from projections.view import fold
from schemas import (
    BackfillFinished,
    BackfillPlanned,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    TriggerDagRun,
)
from tests.unit.projection_logs import LogBuilder

TASK = {"dag_id": "etl", "run_id": "r1", "task_id": "load"}


def _rows(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records).rows


def _command(*events, key=("etl", "q1")):
    return _rows(*events)["command"].get(key)


def rejected(request_id="q1", command="ClearTask", reason="no run r1 of DAG etl", at=9.0):
    return CommandRejected(dag_id="etl", request_id=request_id, command=command, reason=reason, scheduler_id="s1",
                           at=at)


@pytest.mark.parametrize(("event", "expected"), [
    (TriggerDagRun(dag_id="etl", request_id="q1", requested_by="api", at=5),
     ("TriggerDagRun", "manual__q1", None)),
    (ClearTask(**TASK, request_id="q1", downstream=True, requested_by="api", at=5), ("ClearTask", "r1", "load")),
    (ClearTask(dag_id="etl", run_id="r1", task_id="", request_id="q1", requested_by="api", at=5),
     ("ClearTask", "r1", "")),
    (MarkTask(**TASK, state="skipped", request_id="q1", requested_by="api", at=5), ("MarkTask", "r1", "load")),
    (KillTask(**TASK, request_id="q1", requested_by="api", at=5), ("KillTask", "r1", "load")),
    (RequestBackfill(dag_id="etl", request_id="q1", start_date=0, end_date=3600, requested_by="api", at=5),
     ("RequestBackfill", None, None)),
], ids=lambda value: type(value).__name__ if not isinstance(value, tuple) else "")
def test_every_command_with_a_request_id_is_accepted_once_in_the_log(event, expected):
    row = _command(event)
    assert (row["command"], row["run_id"], row["task_id"]) == expected
    assert (row["status"], row["requested_by"], row["at"], row["appended"], row["reason"]) == (
        "accepted", "api", 5, 1, None)
    assert json.loads(row["payload_json"])["request_id"] == "q1"


def test_a_repeated_request_counts_but_keeps_the_first():
    first = MarkTask(**TASK, state="success", request_id="q1", requested_by="cli", at=5)
    again = MarkTask(**TASK, state="failed", request_id="q1", requested_by="cli", at=8)
    row = _command(first, again)
    assert (row["appended"], row["at"], json.loads(row["payload_json"])["state"]) == (2, 5, "success")


@pytest.mark.parametrize("repeat_after", [False, True])
def test_a_rejected_command_stays_rejected(repeat_after):
    clear = ClearTask(**TASK, request_id="q1", at=5)
    row = _command(clear, rejected(), *([clear] if repeat_after else []))
    assert (row["command"], row["status"], row["reason"], row["rejected_at"]) == (
        "ClearTask", "rejected", "no run r1 of DAG etl", 9.0)


def test_a_rejection_without_its_command_is_still_listed():
    row = _command(rejected(command="KillTask"))
    assert (row["command"], row["status"], row["appended"]) == ("KillTask", "rejected", 0)


def test_the_same_request_id_in_two_dags_is_two_commands():
    rows = _rows(KillTask(**TASK, request_id="q1", at=5),
                 KillTask(dag_id="report", run_id="r1", task_id="x", request_id="q1", at=6))["command"]
    assert sorted(rows) == [("etl", "q1"), ("report", "q1")]


def test_commands_without_a_request_id_are_not_listed():
    rows = _rows(ClearTask(**TASK, at=5), PauseDag(dag_id="etl", paused=True, at=6),
                 CancelBackfill(dag_id="etl", backfill_id="b1", at=7))["command"]
    assert {key: row for key, row in rows.items() if row is not None} == {}


# --- backfill ---------------------------------------------------------------------------

REQUEST = RequestBackfill(dag_id="etl", request_id="b1", start_date=0.0, end_date=7200.0, reprocess_failed=True,
                          requested_by="cli", at=5)
PLANNED = BackfillPlanned(dag_id="etl", backfill_id="b1", logical_dates=[3600.0, 0.0, 7200.0], scheduler_id="s1",
                          at=6)


def _backfill(*events):
    return _rows(*events)["backfill"].get(("etl", "b1"))


@pytest.mark.parametrize(("events", "state", "finished_at"), [
    ([REQUEST], "requested", None),
    ([REQUEST, PLANNED], "running", None),
    ([REQUEST, PLANNED, BackfillFinished(dag_id="etl", backfill_id="b1", state="success", at=9)], "success", 9),
    ([REQUEST, PLANNED, BackfillFinished(dag_id="etl", backfill_id="b1", state="failed", at=9)], "failed", 9),
    ([REQUEST, PLANNED, CancelBackfill(dag_id="etl", backfill_id="b1", at=8),
      BackfillFinished(dag_id="etl", backfill_id="b1", state="cancelled", at=9)], "cancelled", 9),
    ([REQUEST, rejected("b1", "RequestBackfill", "DAG etl has no schedule")], "rejected", 9),
])
def test_backfill_states(events, state, finished_at):
    row = _backfill(*events)
    assert (row["state"], row["finished_at"]) == (state, finished_at)
    assert (row["start_date"], row["end_date"], row["reprocess_failed"], row["requested_by"]) == (
        0.0, 7200.0, True, "cli")


def test_a_planned_backfill_lists_its_dates_in_order():
    row = _backfill(REQUEST, PLANNED)
    assert (row["planned"], json.loads(row["logical_dates_json"]), row["planned_at"]) == (3, [0, 3600, 7200], 6)


def test_a_rejection_of_another_command_or_an_unknown_backfill_changes_nothing():
    assert _backfill(REQUEST, rejected("b1", "ClearTask"))["state"] == "requested"
    assert _backfill(PLANNED, CancelBackfill(dag_id="etl", backfill_id="b1", at=8)) is None
    assert _backfill(rejected("b1", "RequestBackfill")) is None


def test_a_cancel_request_is_noted_until_the_scheduler_finishes_the_backfill():
    row = _backfill(REQUEST, PLANNED, CancelBackfill(dag_id="etl", backfill_id="b1", at=8),
                    CancelBackfill(dag_id="etl", backfill_id="b1", at=8.5))
    assert (row["state"], row["cancel_requested_at"]) == ("running", 8)


def test_a_repeated_request_changes_nothing():
    again = RequestBackfill(dag_id="etl", request_id="b1", start_date=0.0, end_date=1.0, at=7)
    assert _backfill(REQUEST, PLANNED, again) == _backfill(REQUEST, PLANNED)
