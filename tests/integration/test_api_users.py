"""Accounts through the log: `tock users|tokens` append events, the projector folds them, the API
admits each role to what it may do (real broker, SQLite and PostgreSQL)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from infra.log import replay
from schemas import USERS, TokenCreated, UserCreated
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
from tests.scenarios.scheduler_support import environment
from tests.unit.projection_logs import example_run
from tock_cli import app as cli

pytestmark = pytest.mark.integration
TOKEN_LINE = re.compile(r"token (\w+) of \S+: (\S+)")


def tock(settings, *args: str, input: str | None = None):
    result = CliRunner().invoke(cli, list(args), env=environment(settings), input=input)
    return result


def caught_up(settings, engine) -> None:
    wait_for(lambda: offsets_reached(engine, log_end(settings)), what="the projector to catch up")


def token_of(settings, engine, username: str, role: str) -> tuple[str, str]:
    """Create ``username`` with ``role`` and a token of it through the CLI: (token id, token)."""
    created = tock(settings, "users", "create", username, "--role", role, "--password-stdin",
                   input="correct horse battery\n")
    assert created.exit_code == 0, created.output
    caught_up(settings, engine)
    made = tock(settings, "tokens", "create", username, "--description", "tests")
    assert made.exit_code == 0, made.output
    caught_up(settings, engine)
    token_id, token = TOKEN_LINE.search(made.output).groups()
    return token_id, token


def test_roles_admit_what_they_may(projection_settings, engine):
    produce(projection_settings, example_run())
    with ProjectorThread(projection_settings), TestClient(create_app(projection_settings)) as client:
        tokens = {role: token_of(projection_settings, engine, f"{role}-1", role)[1]
                  for role in ("viewer", "operator", "admin")}
        bearer = {role: {"Authorization": f"Bearer {token}"} for role, token in tokens.items()}
        assert client.get("/api/v1/dags").status_code == 401
        for role in tokens:
            assert client.get("/api/v1/dags", headers=bearer[role]).status_code == 200
        pause = "/api/v1/dags/etl/pause"
        assert client.post(pause, headers=bearer["viewer"]).status_code == 403
        assert client.post(pause, headers=bearer["operator"]).json()["command"] == "PauseDag"
        assert client.get("/api/v1/users", headers=bearer["operator"]).status_code == 403
        listed = client.get("/api/v1/users", headers=bearer["admin"]).json()["items"]
        assert [user["username"] for user in listed] == ["admin-1", "operator-1", "viewer-1"]
        assert all("password_hash" not in user for user in listed)


def test_revoked_tokens_and_deleted_users_stop_working(projection_settings, engine):
    with ProjectorThread(projection_settings), TestClient(create_app(projection_settings)) as client:
        token_id, token = token_of(projection_settings, engine, "ann", "viewer")
        _, other = token_of(projection_settings, engine, "bob", "viewer")
        headers = {"Authorization": f"Bearer {token}"}
        assert client.get("/api/v1/dags", headers=headers).status_code == 200
        forged = "_".join(token.split("_", 2)[:2]) + "_" + "x" * 43
        assert client.get("/api/v1/dags", headers={"Authorization": f"Bearer {forged}"}).status_code == 401
        assert tock(projection_settings, "tokens", "revoke", token_id).exit_code == 0
        caught_up(projection_settings, engine)
        assert client.get("/api/v1/dags", headers=headers).status_code == 401
        assert tock(projection_settings, "users", "delete", "bob").exit_code == 0
        caught_up(projection_settings, engine)
        assert client.get("/api/v1/dags", headers={"Authorization": f"Bearer {other}"}).status_code == 401
        assert tock(projection_settings, "users", "delete", "bob").exit_code == 1


def test_only_hashes_reach_the_log(projection_settings, engine):
    with ProjectorThread(projection_settings):
        _, token = token_of(projection_settings, engine, "carol", "operator")
    events = [record.event for record in replay(projection_settings, USERS)]
    created = next(event for event in events if isinstance(event, UserCreated))
    assert created.password_hash.startswith("$argon2id$") and "correct horse" not in str(events)
    assert token.split("_", 2)[2] not in str(events)
    assert [type(event) for event in events] == [UserCreated, TokenCreated]
