"""Tokens and sessions belong to one incarnation of an account (issue 20, item 13): deleting an account
ends them even if the name is created again, a password change ends sessions, logout ends the session on
the server. The projector's fold (commit_batch over log positions) and the real app; SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from schemas import TokenCreated, UserDeleted
from services.api import accounts
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import csrf_in, fold_into_tables, log_in, user_created
from tests.unit.projection_logs import LogBuilder

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0


def _token(username: str, at: float) -> tuple[TokenCreated, str]:
    token = accounts.new_token()
    return TokenCreated(token_id=token.token_id, username=username, token_hash=token.token_hash,
                        created_by="tests", at=at), token.token


@pytest.fixture
def app(projection_settings, engine):
    with TestClient(create_app(projection_settings)) as client:
        yield client


def test_a_token_of_a_deleted_account_stays_dead_when_the_name_is_created_again(app, engine):
    log = LogBuilder()
    old_token_event, old_token = _token("alice", AT + 1)
    fold_into_tables(engine, [user_created("alice", "viewer", AT), old_token_event], log)
    old = {"Authorization": f"Bearer {old_token}"}
    assert app.get("/api/v1/dags", headers=old).status_code == 200
    fold_into_tables(engine, [UserDeleted(username="alice", deleted_by="tests", at=AT + 2),
                              user_created("alice", "admin", AT + 3)], log)
    assert app.get("/api/v1/users", headers=old).status_code == 401  # not the new alice's admin
    assert app.get("/api/v1/dags", headers=old).status_code == 401
    new_token_event, new_token = _token("alice", AT + 4)
    fold_into_tables(engine, [new_token_event], log)
    assert app.get("/api/v1/users", headers={"Authorization": f"Bearer {new_token}"}).status_code == 200


def test_a_token_outlives_a_password_change(app, engine):
    log = LogBuilder()
    token_event, token = _token("bob", AT + 1)
    fold_into_tables(engine, [user_created("bob", "viewer", AT), token_event], log)
    fold_into_tables(engine, [user_created("bob", "viewer", AT + 2, password="another password")], log)
    assert app.get("/api/v1/dags", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def _session_works(app) -> bool:
    answer = app.get("/dag-files", follow_redirects=False)
    return answer.status_code == 200


def test_a_password_change_ends_the_sessions(app, engine):
    log = LogBuilder()
    fold_into_tables(engine, [user_created("carol", "operator", AT)], log)
    log_in(app, "carol")
    assert _session_works(app)
    fold_into_tables(engine, [user_created("carol", "operator", AT + 1, password="a new password")], log)
    assert not _session_works(app)
    log_in(app, "carol", "a new password")
    assert _session_works(app)


def test_deleting_and_creating_again_ends_the_sessions(app, engine):
    log = LogBuilder()
    fold_into_tables(engine, [user_created("dan", "viewer", AT)], log)
    log_in(app, "dan")
    fold_into_tables(engine, [UserDeleted(username="dan", deleted_by="tests", at=AT + 1),
                              user_created("dan", "admin", AT + 2)], log)
    assert not _session_works(app)


def test_logout_ends_the_session_on_the_server(app, engine):
    fold_into_tables(engine, [user_created("erin", "viewer", AT)])
    log_in(app, "erin")
    cookie = app.cookies.get("tock_session")
    page = app.get("/dag-files")
    assert app.post("/logout", data={"csrf": csrf_in(page.text)}, follow_redirects=False).status_code == 303
    app.cookies.set("tock_session", cookie)  # a copy of the cookie kept from before the logout
    assert not _session_works(app)
