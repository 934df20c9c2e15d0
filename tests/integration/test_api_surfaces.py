"""Every HTTP surface of the API behind a login (issue 20, item 16): the OpenAPI document and its two
viewers need a viewer's token or session; /health says the database is unavailable without the driver's
text. SQLite and PostgreSQL, the app as `tock api` builds it."""

from __future__ import annotations

import shutil

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import fold_into_tables, log_in, user_created

pytestmark = pytest.mark.integration
TOKEN = "a-test-admin-token-of-32-characters!"
DOCS = ("/docs", "/redoc", "/openapi.json")


@pytest.fixture
def client(make_settings, projection_settings, engine):
    fold_into_tables(engine, [user_created("vic", "viewer", 1.0)])
    settings = make_settings(db_url=projection_settings.db_url, api_token=TOKEN)
    with TestClient(create_app(settings)) as client:
        yield client


def test_the_api_documents_need_a_login(client):
    for path in DOCS:
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code in (401, 303), (path, answer.status_code)
        if answer.status_code == 303:
            assert answer.headers["location"].startswith("/login"), path
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/openapi.json", headers=bearer).json()["info"]["title"] == "Tock API"
    assert client.get("/openapi.json", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_a_viewer_s_session_reads_the_documents(client):
    log_in(client, "vic")
    for path in DOCS:
        assert client.get(path).status_code == 200, path
    assert "/openapi.json" in client.get("/docs").text


def test_health_does_not_show_the_driver_s_error(make_settings, tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    settings = make_settings(db_url=f"sqlite:///{folder / 'projections.db'}")
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").json() == {"status": "ok", "database": "ok"}
        shutil.rmtree(folder)  # the database is gone: a real failure to connect
        client.app.state.engine.dispose()
        answer = client.get("/health")
    assert answer.status_code == 503
    assert answer.json() == {"status": "degraded", "database": "database unavailable"}
