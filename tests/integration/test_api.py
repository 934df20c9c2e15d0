"""The API over a projected example run (SQLite and PostgreSQL); commands land in the log."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import EVENTS, ClearTask, MarkTask, PauseDag, TriggerDagRun
from services.api.app import create_app
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
from tests.unit.projection_logs import example_run

pytestmark = pytest.mark.integration
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN = "/api/v1/dags/etl/runs/manual__1"


@pytest.fixture
def client(make_settings, projection_settings, engine):
    produce(projection_settings, example_run())
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    # An installation has a Fernet key (standalone writes one): the variables and connections work.
    settings = make_settings(db_url=projection_settings.db_url, api_token=TOKEN,
                             fernet_key=Fernet.generate_key().decode())
    with TestClient(create_app(settings), headers=AUTH) as client:
        yield client


def _items(client, path: str, **params) -> list[dict]:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_read_endpoints(client):
    assert client.get("/health").json() == {"status": "ok", "database": "ok"}
    assert [dag["dag_id"] for dag in _items(client, "/api/v1/dags", active=True)] == ["etl"]
    assert client.get("/api/v1/dags/etl").json()["schedule"] == "@hourly"
    shown = client.get("/api/v1/dags/etl").json()  # what the UI shows (DagParsed v22): the defaults here
    assert (shown["dag_display_name"], shown["owners"], shown["description"], shown["owner_links"]) == (
        "etl", "airflow", None, {})
    assert [run["run_id"] for run in _items(client, "/api/v1/runs", state="success")] == ["manual__1"]
    assert _items(client, "/api/v1/dags/etl/runs", state="failed") == []
    assert client.get(RUN).json()["conf"] == {"x": 1}
    assert (client.get(RUN).json()["duration"], client.get(RUN).json()["deadline_missed_at"]) == (9.0, None)
    tasks = _items(client, f"{RUN}/tasks")
    assert [(t["task_id"], t["state"], t["try_number"]) for t in tasks] == [
        ("extract", "success", 1), ("load", "success", 1), ("transform", "success", 2)]
    assert client.get(f"{RUN}/tasks/transform").json()["executor"] == "local"
    history = _items(client, f"{RUN}/tasks/transform/history")
    assert len(history) == 9 and history[0]["payload"]["try_number"] == 1
    assert [e["event_type"] for e in _items(client, f"{RUN}/tasks/transform/history", limit=2, offset=1)] == [
        "TaskLaunched", "TaskStarted"]
    assert [e["file_path"] for e in _items(client, "/api/v1/import-errors")] == ["/dags/broken.py"]
    assert {p["state"] for p in _items(client, "/api/v1/parse-status")} == {"ok", "failed"}
    assert [s["partitions"] for s in _items(client, "/api/v1/schedulers")] == [[0, 1, 2]]


def test_unknown_things_are_404_and_bad_input_422(client):
    assert client.get("/api/v1/dags/nope").status_code == 404
    assert client.get(f"{RUN}/tasks/nope").status_code == 404
    bad_limit = client.get("/api/v1/runs", params={"limit": 0})
    assert bad_limit.status_code == 422 and "limit" in bad_limit.json()["detail"]
    no_state = client.post(f"{RUN}/tasks/load/mark", json={}, headers=AUTH)
    assert no_state.status_code == 422 and "state" in no_state.json()["detail"]
    bad_state = client.post(f"{RUN}/tasks/load/mark", json={"state": "great"}, headers=AUTH)
    assert bad_state.status_code == 409 and "cannot mark" in bad_state.json()["detail"]
    bad_conf = client.post("/api/v1/dags/etl/runs", json={"conf": [1, 2]}, headers=AUTH)
    assert bad_conf.status_code == 422 and "conf" in bad_conf.json()["detail"]
    assert client.post("/api/v1/dags/nope/pause", headers=AUTH).status_code == 404


@pytest.mark.parametrize("path", [f"{RUN}/tasks/load", f"{RUN}/tasks/load/history", f"{RUN}/tasks/load/logs"])
def test_an_integer_past_what_the_database_binds_is_422_not_500(client, path):
    # SQLite raises OverflowError binding an integer past 64 bits; the route's bound must refuse it first.
    response = client.get(path, params={"map_index": 2**70})
    assert response.status_code == 422 and "map_index" in response.json()["detail"]


def test_every_endpoint_but_health_needs_a_token(client):
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"},
                    {"Authorization": "Bearer tock_abc_def"}):
        assert client.post("/api/v1/dags/etl/pause", headers=headers).status_code == 401
        for path in ("/api/v1/dags", f"{RUN}/tasks", "/api/v1/executors", "/api/v1/users", "/metrics"):
            assert client.get(path, headers=headers).status_code == 401, path
    assert client.get("/health", headers={"Authorization": ""}).status_code == 200  # probes carry no token


def test_commands_are_appended_to_the_log(client, projection_settings):
    trigger = client.post("/api/v1/dags/etl/runs", json={"conf": {"k": "v"}}, headers=AUTH)
    assert trigger.status_code == 202, trigger.text
    for path, body in [(f"{RUN}/tasks/load/clear", None), (f"{RUN}/tasks/load/mark", {"state": "failed"}),
                       ("/api/v1/dags/etl/pause", None), ("/api/v1/dags/etl/unpause", None)]:
        assert client.post(path, json=body, headers=AUTH).status_code == 202
    commands = [r.event for r in replay(projection_settings, EVENTS)
                if isinstance(r.event, (TriggerDagRun, ClearTask, MarkTask, PauseDag))]
    assert [type(c).__name__ for c in commands] == ["TriggerDagRun", "ClearTask", "MarkTask", "PauseDag", "PauseDag"]
    assert (commands[0].request_id, commands[0].conf_json) == (trigger.json()["request_id"], '{"k": "v"}')
    assert (commands[2].state, commands[3].paused, commands[4].paused) == ("failed", True, False)


def test_metrics(client):
    client.get("/api/v1/dags")
    text = client.get("/metrics").text
    assert 'tock_api_requests_total{method="GET",route="/api/v1/dags",status="200"}' in text
    assert "tock_projection_next_offset{" in text
