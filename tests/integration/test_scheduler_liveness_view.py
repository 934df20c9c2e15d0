"""A scheduler that stopped heartbeating reads as dead: in the query, the API and the CLI.

The ``scheduler`` table is a fold and knows no clock, so it keeps "alive" for a scheduler
killed with ``kill -9``; "dead" is judged at read time from ``now`` and the last heartbeat.
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from projections import queries
from projections.writer import commit_batch
from schemas import SchedulerHeartbeat, SchedulerStopped
from services.api.app import create_app
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
from tests.unit.projection_logs import LogBuilder
from tock_cli import app

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
SILENCE_LIMIT = 10.0
LONG_AGO = 3600.0


def _beat(scheduler_id: str, at: float) -> SchedulerHeartbeat:
    return SchedulerHeartbeat(scheduler_id=scheduler_id, hostname="host", pid=7, partitions=[0, 1], at=at)


def _three_schedulers(now: float) -> list:
    """s-alive beat just now; s-killed last beat an hour ago (kill -9); s-stopped stopped cleanly an hour ago."""
    return [_beat("s-alive", now), _beat("s-killed", now - LONG_AGO),
            _beat("s-stopped", now - LONG_AGO), SchedulerStopped(scheduler_id="s-stopped", at=now - LONG_AGO + 1)]


def _fold_into_tables(engine, events: list) -> None:
    builder = LogBuilder()
    for event in events:
        builder.add(event)

    def refuse(record, reason):
        raise AssertionError(f"unexpected dead letter {record}: {reason}")

    commit_batch(engine, builder.records, {}, {}, refuse)


def _states(engine, now: float, state: str | None = None, **paging) -> dict[str, str]:
    rows = queries.schedulers(engine, now=now, silence_limit=SILENCE_LIMIT, state=state, **paging)
    return {row["scheduler_id"]: row["state"] for row in rows}


def test_silence_past_the_limit_reads_as_dead_and_a_clean_stop_never_does(engine):
    _fold_into_tables(engine, _three_schedulers(AT))
    assert _states(engine, AT) == {"s-alive": "alive", "s-killed": "dead", "s-stopped": "stopped"}
    # An hour later all have been silent; the one that stopped cleanly is still only stopped.
    assert _states(engine, AT + LONG_AGO) == {"s-alive": "dead", "s-killed": "dead", "s-stopped": "stopped"}
    # The table itself is unchanged: the fold keeps what the log says.
    assert queries.count(engine, "scheduler") == 3


@pytest.mark.parametrize("silent_for, expected", [
    (0.0, "alive"), (SILENCE_LIMIT - 0.5, "alive"), (SILENCE_LIMIT, "alive"), (SILENCE_LIMIT + 0.5, "dead")])
def test_dead_only_once_the_silence_exceeds_the_limit(engine, silent_for, expected):
    _fold_into_tables(engine, [_beat("s1", AT)])
    assert _states(engine, AT + silent_for) == {"s1": expected}


def test_a_heartbeat_after_a_long_silence_is_alive_again(engine):
    # e.g. a scheduler frozen with SIGSTOP and thawed: its next heartbeat brings it back.
    _fold_into_tables(engine, [_beat("s1", AT - LONG_AGO)])
    assert _states(engine, AT) == {"s1": "dead"}
    _fold_into_tables(engine, [_beat("s1", AT - LONG_AGO), _beat("s1", AT)])
    assert _states(engine, AT) == {"s1": "alive"}


def test_the_state_filter_uses_the_judged_state_and_pages_consistently(engine):
    _fold_into_tables(engine, _three_schedulers(AT) + [_beat("s-killed-2", AT - LONG_AGO)])
    assert _states(engine, AT, "dead") == {"s-killed": "dead", "s-killed-2": "dead"}
    assert _states(engine, AT, "alive") == {"s-alive": "alive"}
    assert _states(engine, AT, "stopped") == {"s-stopped": "stopped"}
    assert _states(engine, AT, "dead", limit=1, offset=1) == {"s-killed-2": "dead"}
    assert _states(engine, AT + LONG_AGO, "alive") == {}


def test_the_silence_limit_is_the_session_timeout_and_never_under_two_heartbeats(make_settings):
    assert queries.scheduler_silence_limit(make_settings(scheduler_session_timeout=30)) == 30
    slow_beats = make_settings(scheduler_session_timeout=10, task_heartbeat_seconds=20)
    assert queries.scheduler_silence_limit(slow_beats) == 40


@pytest.fixture
def projected(make_settings, projection_settings, engine):
    """The three schedulers written to the broker and projected; settings whose limit outlasts the test."""
    produce(projection_settings, _three_schedulers(time.time()))
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    return make_settings(db_url=projection_settings.db_url, scheduler_session_timeout=300)


def test_the_api_shows_a_silent_scheduler_as_dead(projected):
    with TestClient(create_app(projected.model_copy(update={'api_token': ADMIN_TOKEN})), headers=ADMIN) as client:
        listed = client.get("/api/v1/schedulers")
        assert listed.status_code == 200, listed.text
        assert {s["scheduler_id"]: s["state"] for s in listed.json()["items"]} == {
            "s-alive": "alive", "s-killed": "dead", "s-stopped": "stopped"}
        dead = client.get("/api/v1/schedulers", params={"state": "dead"}).json()["items"]
        assert [(s["scheduler_id"], s["partitions"]) for s in dead] == [("s-killed", [0, 1])]
        unknown = client.get("/api/v1/schedulers", params={"state": "running"})
        assert unknown.status_code == 422 and "state" in unknown.json()["detail"]


def test_the_cli_shows_a_silent_scheduler_as_dead(projected):
    def tock(*args: str):
        result = CliRunner().invoke(app, ["schedulers", "list", *args], env=environment(projected))
        assert result.exit_code == 0, result.output
        return result.output

    listed = json.loads(tock("--json"))
    assert {s["scheduler_id"]: s["state"] for s in listed} == {
        "s-alive": "alive", "s-killed": "dead", "s-stopped": "stopped"}
    assert [s["scheduler_id"] for s in json.loads(tock("--state", "dead", "--json"))] == ["s-killed"]
    table = tock("--state", "dead")
    assert "s-killed" in table and "dead" in table and "s-alive" not in table
