"""Operator commands through the API (real broker, SQLite and PostgreSQL): idempotency keys, 404 / 409 /
422, command status, backfills."""

from __future__ import annotations

import dataclasses

import pytest

from infra.log import replay
from schemas import (
    EVENTS,
    BackfillFinished,
    BackfillPlanned,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    DagRemoved,
    DagRunCreated,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    TaskQueued,
    TaskStarted,
    TriggerDagRun,
)
from tests.integration.projection_db import (  # noqa: F401
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.integration.test_api import AUTH, RUN, client  # noqa: F401 - fixture
from tests.unit.projection_logs import dag_parsed

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0


def _commands(settings, *types) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, types)]


def _project(settings, engine, events=()) -> None:
    """Append ``events``, then fold the whole log into the tables."""
    produce(settings, list(events))
    with ProjectorThread(settings):
        wait_for(lambda: offsets_reached(engine, log_end(settings)), what="the projector to catch up")


def post(client, path, json=None, key=None):
    headers = {**AUTH, **({"Idempotency-Key": key} if key else {})}
    return client.post(path, json=json, headers=headers)


COMMANDS = [  # (path, body, command, run_id, task_id)
    ("/api/v1/dags/etl/runs", {"conf": {"k": 1}}, TriggerDagRun, "manual__K1", None),
    (f"{RUN}/tasks/load/clear", {"downstream": True}, ClearTask, "manual__1", "load"),
    (f"{RUN}/clear", None, ClearTask, "manual__1", ""),
    (f"{RUN}/tasks/load/mark", {"state": "skipped"}, MarkTask, "manual__1", "load"),
    ("/api/v1/dags/etl/backfills", {"start_date": "2024-01-01", "end_date": "2024-01-02T00:00:00Z"},
     RequestBackfill, None, None),
]


@pytest.mark.parametrize(("path", "body", "command", "run_id", "task_id"), COMMANDS,
                         ids=[f"{c[2].__name__}-{c[4]}" for c in COMMANDS])
def test_the_same_idempotency_key_gives_the_same_body_and_the_same_request_id(
        client, projection_settings, path, body, command, run_id, task_id):
    first, again = post(client, path, body, key="K1"), post(client, path, body, key="K1")
    assert first.status_code == again.status_code == 202, first.text
    assert first.json() == again.json()
    assert (first.json()["request_id"], first.json()["run_id"], first.json()["task_id"]) == ("K1", run_id, task_id)
    assert first.json()["status_url"] == "/api/v1/commands/K1"
    appended = _commands(projection_settings, command)
    assert [event.request_id for event in appended] == ["K1", "K1"]


def test_without_a_key_each_request_gets_its_own_request_id(client, projection_settings):
    ids = {post(client, "/api/v1/dags/etl/runs", {}).json()["request_id"] for _ in range(2)}
    assert len(ids) == 2
    triggers = _commands(projection_settings, TriggerDagRun)
    assert {event.request_id for event in triggers} == ids
    assert {post(client, "/api/v1/dags/etl/runs", {}, key=key).json()["run_id"] for key in ids} == {
        f"manual__{key}" for key in ids}


def test_every_command_carries_what_it_was_asked(client, projection_settings):
    post(client, f"{RUN}/tasks/load/clear", {"upstream": True}, key="c")
    post(client, f"{RUN}/tasks/load/mark", {"state": "failed"}, key="m")
    post(client, "/api/v1/dags/etl/pause", key="p")
    post(client, "/api/v1/dags/etl/unpause")
    clear, = _commands(projection_settings, ClearTask)
    mark, = _commands(projection_settings, MarkTask)
    assert (clear.task_id, clear.upstream, clear.downstream, clear.requested_by) == ("load", True, False, "api-token")
    assert (mark.state, mark.request_id) == ("failed", "m")
    assert [event.paused for event in _commands(projection_settings, PauseDag)] == [True, False]


def test_a_key_used_for_another_command_is_refused(client, projection_settings, engine):
    assert post(client, f"{RUN}/tasks/load/clear", key="once").status_code == 202
    _project(projection_settings, engine)
    again = post(client, f"{RUN}/tasks/extract/clear", key="once")
    assert again.status_code == 409 and "already used for ClearTask on etl/manual__1/load" in again.json()["detail"]
    assert post(client, f"{RUN}/tasks/load/clear", key="once").status_code == 202


@pytest.mark.parametrize("key", ["has space", "a/b", "x" * 129, "-leading", "a:b"])
def test_a_malformed_key_is_422(client, key):
    response = post(client, "/api/v1/dags/etl/pause", key=key)
    assert response.status_code == 422, response.text


@pytest.mark.parametrize(("path", "body"), [
    ("/api/v1/dags/nope/runs", {}),
    ("/api/v1/dags/nope/pause", None),
    ("/api/v1/dags/nope/backfills", {"start_date": "2024-01-01", "end_date": "2024-01-02"}),
    ("/api/v1/dags/nope/runs/manual__1/clear", None),
    ("/api/v1/dags/etl/runs/nope/clear", None),
    ("/api/v1/dags/etl/runs/nope/tasks/load/clear", None),
    ("/api/v1/dags/etl/runs/nope/tasks/load/mark", {"state": "success"}),
    ("/api/v1/dags/etl/runs/nope/tasks/load/kill", None),
    ("/api/v1/dags/etl/backfills/nope/cancel", None),
])
def test_unknown_dags_runs_and_backfills_are_404(client, path, body):
    response = post(client, path, body)
    assert response.status_code == 404, response.text
    assert "no " in response.json()["detail"]


@pytest.mark.parametrize(("path", "body", "reason"), [
    (f"{RUN}/tasks/nope/clear", None, "DAG etl has no task nope (its tasks: extract, transform, load)"),
    (f"{RUN}/tasks/nope/mark", {"state": "success"}, "has no task nope"),
    (f"{RUN}/tasks/load/mark", {"state": "great"}, "cannot mark a task 'great'"),
    (f"{RUN}/tasks/load/mark", {"state": "running"}, "one of success, failed, skipped"),
    (f"{RUN}/tasks/load/kill", None, "task load has no try to kill (its state is success)"),
    ("/api/v1/dags/etl/backfills", {"start_date": "2024-01-02", "end_date": "2024-01-01"},
     "ends (2024-01-01T00:00:00+00:00) before it starts"),
    ("/api/v1/dags/manual/backfills", {"start_date": "2024-01-01", "end_date": "2024-01-02"},
     "DAG manual has no schedule intervals to backfill"),
    ("/api/v1/dags/gone/runs", {}, "DAG gone was deleted"),
])
def test_impossible_commands_are_409_with_the_reason(client, projection_settings, engine, path, body, reason):
    manual = dataclasses.replace(dag_parsed("manual", AT), definition=dataclasses.replace(
        dag_parsed("manual", AT).definition, schedule=None))
    _project(projection_settings, engine, [manual, dag_parsed("gone", AT),
                                           DagRemoved(dag_id="gone", file_path="/dags/etl.py", at=AT + 1)])
    response = post(client, path, body)
    assert response.status_code == 409, response.text
    assert reason in response.json()["detail"]
    assert _commands(projection_settings, ClearTask, MarkTask, KillTask, RequestBackfill, TriggerDagRun) == []


@pytest.mark.parametrize(("path", "body", "field"), [
    (f"{RUN}/tasks/load/mark", {}, "state"),
    (f"{RUN}/tasks/load/mark", {"state": ["success"]}, "state"),
    (f"{RUN}/tasks/load/clear", {"downstream": "maybe"}, "downstream"),
    (f"{RUN}/tasks/load/clear", {"sideways": True}, "sideways"),
    ("/api/v1/dags/etl/backfills", {"start_date": "yesterday", "end_date": "2024-01-02"}, "ISO 8601"),
    ("/api/v1/dags/etl/backfills", {"start_date": "2024-01-01"}, "end_date"),
    ("/api/v1/dags/etl/backfills", {"start_date": 1e300, "end_date": "2024-01-02"}, "between the years"),
])
def test_malformed_input_is_422(client, path, body, field):
    response = post(client, path, body)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_a_task_not_queued_yet_can_be_cleared_and_marked(client, projection_settings, engine):
    created = DagRunCreated(dag_id="etl", run_id="r2", logical_date=AT, run_type="manual", dag_fingerprint="f",
                            scheduler_id="s1", at=AT + 20)
    _project(projection_settings, engine, [created])
    assert post(client, "/api/v1/dags/etl/runs/r2/tasks/load/clear").status_code == 202
    assert post(client, "/api/v1/dags/etl/runs/r2/tasks/load/mark", {"state": "success"}).status_code == 202
    assert post(client, "/api/v1/dags/etl/runs/r2/tasks/load/kill").status_code == 409


def test_a_running_try_can_be_killed(client, projection_settings, engine):
    ids = {"dag_id": "etl", "run_id": "manual__1", "task_id": "load", "try_number": 2}
    _project(projection_settings, engine, [
        TaskQueued(**ids, executor="local", queue="default", scheduler_id="s1", at=AT + 20),
        TaskStarted(**ids, runner_id="w", hostname="h", pid=1, at=AT + 21)])
    response = post(client, f"{RUN}/tasks/load/kill", key="kill-1")
    assert response.status_code == 202, response.text
    kill, = _commands(projection_settings, KillTask)
    assert (kill.task_id, kill.request_id) == ("load", "kill-1")


def test_a_commands_status_follows_the_log(client, projection_settings, engine):
    assert client.get("/api/v1/commands/c1").status_code == 404
    post(client, f"{RUN}/tasks/load/clear", key="c1")
    post(client, f"{RUN}/tasks/load/clear", key="c1")
    _project(projection_settings, engine)
    status = client.get("/api/v1/commands/c1").json()
    assert (status["command"], status["status"], status["appended"], status["task_id"]) == (
        "ClearTask", "accepted", 2, "load")
    _project(projection_settings, engine, [CommandRejected(dag_id="etl", request_id="c1", command="ClearTask",
                                                           reason="run manual__1 is unknown", scheduler_id="s1",
                                                           at=AT + 30)])
    status = client.get("/api/v1/commands/c1").json()
    assert (status["status"], status["reason"]) == ("rejected", "run manual__1 is unknown")


def test_a_backfill_is_requested_followed_and_cancelled(client, projection_settings, engine):
    response = post(client, "/api/v1/dags/etl/backfills", {"start_date": "2024-01-01T00:00:00+00:00",
                                                           "end_date": 1704070800, "reprocess_failed": True},
                    key="b1")
    assert response.status_code == 202 and response.json()["backfill_id"] == "b1"
    request, = _commands(projection_settings, RequestBackfill)
    assert (request.start_date, request.end_date, request.reprocess_failed) == (1704067200.0, 1704070800.0, True)
    dates = [1704067200.0, 1704070800.0]
    _project(projection_settings, engine, [
        BackfillPlanned(dag_id="etl", backfill_id="b1", logical_dates=dates, scheduler_id="s1", at=AT + 40),
        DagRunCreated(dag_id="etl", run_id="backfill__2024-01-01T00:00:00+00:00", logical_date=dates[0],
                      run_type="backfill", dag_fingerprint="f", scheduler_id="s1", at=AT + 41)])
    backfill = client.get("/api/v1/dags/etl/backfills/b1").json()
    assert (backfill["state"], backfill["planned"], backfill["created"], backfill["finished"]) == (
        "running", 2, 1, 0)
    assert [item["backfill_id"] for item in client.get("/api/v1/dags/etl/backfills").json()["items"]] == ["b1"]
    assert post(client, "/api/v1/dags/etl/backfills/b1/cancel").status_code == 202
    cancel, = _commands(projection_settings, CancelBackfill)
    assert cancel.backfill_id == "b1"
    _project(projection_settings, engine, [BackfillFinished(dag_id="etl", backfill_id="b1", state="cancelled",
                                                            at=AT + 50)])
    assert client.get("/api/v1/dags/etl/backfills/b1").json()["state"] == "cancelled"
    assert post(client, "/api/v1/dags/etl/backfills/b1/cancel").status_code == 409
    assert client.get("/api/v1/dags/etl/backfills/nope").status_code == 404
