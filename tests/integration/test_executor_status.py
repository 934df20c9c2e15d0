"""``tock executors status`` and ``GET /api/v1/executors`` over the real broker and database.

Tries and scheduler heartbeats are appended with the log client, worker presence by the real
WorkerPresence; the projector folds them; the CLI (plain and --json) and the API read the tables.
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from projections.tables import LIVE
from schemas import SchedulerHeartbeat, TaskHeartbeat, TaskQueued, TaskStarted, TaskSucceeded
from services.api.app import create_app
from services.worker.presence import WorkerPresence
from tests.integration.api_support import ADMIN, ADMIN_TOKEN
from tests.integration.projection_db import (  # noqa: F401 - fixtures
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.scenarios.scheduler_support import environment
from tock_cli import app

pytestmark = pytest.mark.integration
HOUR = 3600.0


def _try(task_id: str, executor: str, queue: str, at: float, *, state: str) -> list:
    ids = {"dag_id": "etl", "run_id": "r1", "task_id": task_id, "try_number": 1}
    events = [TaskQueued(**ids, executor=executor, queue=queue, scheduler_id="s1", at=at)]
    if state in ("running", "success"):
        events += [TaskStarted(**ids, runner_id=f"runner-{task_id}", hostname="h", pid=9, at=at + 1),
                   TaskHeartbeat(**ids, runner_id=f"runner-{task_id}", at=at + 2)]
    if state == "success":
        events.append(TaskSucceeded(**ids, runner_id=f"runner-{task_id}", at=at + 3))
    return events


def _log(now: float) -> list:
    """celery: default has one running and one queued try, gpu one queued, one try finished (not
    counted); local: one running try; scheduler s1 beat just now."""
    return [*_try("a", "celery", "default", now - 10, state="running"),
            *_try("b", "celery", "default", now - 10, state="queued"),
            *_try("c", "celery", "gpu", now - 10, state="queued"),
            *_try("d", "celery", "default", now - 20, state="success"),
            *_try("e", "local", "default", now - 10, state="running"),
            SchedulerHeartbeat(scheduler_id="s1", hostname="h", pid=42, partitions=[0, 1, 2], at=now)]


def _presence(settings, now: float) -> None:
    """celery@a beats now; celery@b beat and stopped; celery@c last beat an hour ago (killed)."""
    with WorkerPresence(settings, "celery@a", "celery", ["gpu", "default"], 4) as alive:
        alive.beat()
    with WorkerPresence(settings, "celery@b", "celery", ["default"], 2) as stopping:
        stopping.beat(now - 5)
        assert stopping.stopped(now - 1)
    with WorkerPresence(settings, "celery@c", "celery", ["default"], 8) as killed:
        killed.beat(now - HOUR)


@pytest.fixture
def projected(make_settings, projection_settings, engine):
    now = time.time()
    produce(projection_settings, _log(now))
    _presence(projection_settings, now)
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    return make_settings(db_url=projection_settings.db_url, executors="local,celery", task_heartbeat_seconds=60)


def _tock(settings, *args: str):
    return CliRunner().invoke(app, list(args), env=environment(settings))


def _without_ages(items: list[dict]) -> list[dict]:
    return [{**item, "workers": [{**worker, "age": None} for worker in item["workers"]]} for item in items]


def test_the_cli_shows_tries_per_queue_and_workers(projected):
    result = _tock(projected, "executors", "status", "--json")
    assert result.exit_code == 0, result.output
    celery, local = json.loads(result.output)
    assert (celery["executor"], celery["configured"], celery["running"], celery["queued"]) == ("celery", True, 1, 2)
    assert celery["queues"] == [{"queue": "default", "queued": 1, "running": 1},
                                {"queue": "gpu", "queued": 1, "running": 0}]
    assert [(w["worker"], w["state"], w["queues"], w["concurrency"]) for w in celery["workers"]] == [
        ("celery@a", "alive", ["default", "gpu"], 4), ("celery@b", "stopped", ["default"], 2),
        ("celery@c", "dead", ["default"], 8)]
    assert celery["workers"][2]["age"] >= HOUR and celery["last_task_heartbeat"] is not None
    assert (local["running"], local["queued"], local["workers_alive"]) == (1, 0, 1)
    assert [(w["worker"], w["kind"], w["state"]) for w in local["workers"]] == [("s1", "scheduler", "alive")]
    table = _tock(projected, "executors", "status")
    assert table.exit_code == 0, table.output
    for text in ("celery@a", "celery@c", "stopped", "dead", "1 alive / 3 seen", "gpu", "s ago"):
        assert text in table.output


def test_the_cli_filters_by_executor_and_names_an_unknown_one(projected):
    only = _tock(projected, "executors", "status", "local", "--json")
    assert only.exit_code == 0, only.output
    assert [entry["executor"] for entry in json.loads(only.output)] == ["local"]
    unknown = _tock(projected, "executors", "status", "kubernetes")
    assert unknown.exit_code == 1
    assert "no executor 'kubernetes'" in unknown.output and "known: celery, local" in unknown.output


def test_the_api_answers_what_the_cli_prints(projected):
    printed = json.loads(_tock(projected, "executors", "status", "--json").output)
    with TestClient(create_app(projected.model_copy(update={'api_token': ADMIN_TOKEN})), headers=ADMIN) as client:
        listed = client.get("/api/v1/executors")
        assert listed.status_code == 200, listed.text
        assert listed.json()["silence_limit"] == 180.0
        assert _without_ages(listed.json()["items"]) == _without_ages(printed)
        one = client.get("/api/v1/executors/celery")
        assert one.status_code == 200 and one.json()["queues"][1] == {"queue": "gpu", "queued": 1, "running": 0}
        missing = client.get("/api/v1/executors/kubernetes")
        assert missing.status_code == 404 and "no executor kubernetes" in missing.json()["detail"]


def test_rebuild_verify_covers_the_workers(projected, engine):
    assert _tock(projected, "projections", "rebuild", "--verify").exit_code == 0
    with engine.begin() as connection:
        connection.execute(update(LIVE["executor_worker"]).values(concurrency=1))
    tampered = _tock(projected, "projections", "rebuild", "--verify")
    assert tampered.exit_code == 1 and "executor_worker" in tampered.output
    assert _tock(projected, "projections", "rebuild").exit_code == 0
    assert _tock(projected, "projections", "rebuild", "--verify").exit_code == 0
