"""/api/v1/variables and /api/v1/connections: admins only, CRUD through tock.secrets (real broker, SQLite),
idempotent PUTs, passwords hidden unless asked for; and the admin's UI pages."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import SECRETS, VariableSet
from services.api.app import create_app
from tests.integration.projection_db import ProjectorThread, engine, produce  # noqa: F401
from tests.integration.test_api_users import token_of
from tests.unit.projection_logs import example_run

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(make_settings, tmp_path):
    from tests.scenarios.scheduler_support import create_topics

    settings = make_settings(db_url=f"sqlite:///{tmp_path / 'projections.db'}",
                             fernet_key=Fernet.generate_key().decode())
    create_topics(settings)
    return settings


@pytest.fixture
def projection_settings(settings):  # what engine and token_of read
    return settings


def test_only_admins_reach_variables_and_connections_and_crud_works(settings, engine):
    produce(settings, example_run())
    with ProjectorThread(settings), TestClient(create_app(settings)) as client:
        bearer = {role: {"Authorization": f"Bearer {token_of(settings, engine, f'{role}-1', role)[1]}"}
                  for role in ("viewer", "operator", "admin")}
        for role in ("viewer", "operator"):
            for method, path in (("get", "/api/v1/variables"), ("put", "/api/v1/variables/x"),
                                 ("get", "/api/v1/connections"), ("delete", "/api/v1/connections/x")):
                assert client.request(method, path, headers=bearer[role], json={"value": "v"}).status_code == 403
        assert client.get("/api/v1/variables").status_code == 401
        admin = bearer["admin"]

        put = client.put("/api/v1/variables/db_password", headers=admin, json={"value": "pw-111-xyz",
                                                                              "description": "db"})
        assert put.status_code == 200 and put.json() == {"name": "db_password", "event": "VariableSet"}
        again = client.put("/api/v1/variables/db_password", headers=admin, json={"value": "pw-111-xyz",
                                                                                "description": "db"})
        assert again.json() == {"name": "db_password", "event": None}
        assert client.get("/api/v1/variables/db_password", headers=admin).json()["value"] == "pw-111-xyz"
        listed = client.get("/api/v1/variables", headers=admin).json()
        assert [(row["key"], row["description"], row["set_by"]) for row in listed] == [("db_password", "db",
                                                                                      "admin-1")]
        assert "pw-111-xyz" not in str(listed)
        assert client.put("/api/v1/variables/bad key", headers=admin, json={"value": "v"}).status_code == 422

        conn = client.put("/api/v1/connections/wh", headers=admin,
                          json={"uri": "postgres://etl:cpw-222-xyz@db:5432/dw", "description": "warehouse"})
        assert conn.json().get("event") == "ConnectionSet", conn.text
        shown = client.get("/api/v1/connections/wh", headers=admin).json()
        assert (shown["password"], shown["host"], shown["description"]) == ("***", "db", "warehouse")
        revealed = client.get("/api/v1/connections/wh", headers=admin, params={"reveal": "true"}).json()
        assert revealed["password"] == "cpw-222-xyz"
        fields = client.put("/api/v1/connections/api", headers=admin,
                            json={"conn_type": "http", "host": "h", "port": 443, "extra": {"timeout": 5}})
        assert fields.json()["event"] == "ConnectionSet"
        assert client.put("/api/v1/connections/bad", headers=admin,
                          json={"uri": "no scheme here"}).status_code == 422
        assert [row["conn_id"] for row in client.get("/api/v1/connections", headers=admin).json()] == ["api", "wh"]

        assert client.delete("/api/v1/variables/db_password", headers=admin).json()["event"] == "VariableDeleted"
        assert client.delete("/api/v1/variables/db_password", headers=admin).status_code == 404
        assert client.get("/api/v1/variables/db_password", headers=admin).status_code == 404
        assert client.delete("/api/v1/connections/wh", headers=admin).json()["event"] == "ConnectionDeleted"
    sets = [record.event for record in replay(settings, SECRETS) if isinstance(record.event, VariableSet)]
    assert len(sets) == 1  # the repeated PUT appended nothing


def test_the_ui_pages_are_for_admins_and_their_forms_set_and_delete(settings):
    from projections.db import create_tables, open_engine
    from tests.integration.ui_pages_support import csrf_in, fold_into_tables, log_in, user_created

    engine = open_engine(settings)
    create_tables(engine)
    fold_into_tables(engine, [user_created("ada", "admin", 1.0), user_created("vic", "viewer", 2.0)])
    with TestClient(create_app(settings)) as client:
        log_in(client, "vic")
        assert client.get("/variables").status_code == 403
        assert client.get("/connections").status_code == 403
    with TestClient(create_app(settings)) as client:
        log_in(client, "ada")
        page = client.get("/variables")
        assert page.status_code == 200 and "No variable" in page.text
        posted = client.post("/variables", data={"key": "region", "value": "eu-9-secret", "description": "where",
                                                 "csrf": csrf_in(page.text)})
        assert posted.status_code == 200 and 'data-key="region"' in posted.text  # followed the redirect
        assert "eu-9-secret" not in posted.text
        page = client.get("/connections")
        posted = client.post("/connections", data={"conn_id": "wh", "uri": "postgres://etl:cpw-333@db/dw",
                                                   "csrf": csrf_in(page.text)})
        assert 'data-conn-id="wh"' in posted.text and "cpw-333" not in posted.text
        deleted = client.post("/variables/region/delete", data={"csrf": csrf_in(posted.text)})
        assert "No variable" in deleted.text
        assert client.post("/connections/wh/delete", data={"csrf": "wrong"}).status_code == 403
    engine.dispose()
