"""A web UI confirmation is one command however often it is posted (issue 20, item 18): the form carries
the request id chosen when it was shown. Real broker, SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import EVENTS, TriggerDagRun
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import csrf_in, dag_parsed, fold_into_tables, log_in, user_created

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0


def test_a_ui_confirm_posted_twice_appends_one_request_id(projection_settings, engine):
    fold_into_tables(engine, [dag_parsed("etl", {"extract": []}, AT, schedule="@hourly"),
                              user_created("olga", "operator", AT)])
    with TestClient(create_app(projection_settings)) as client:
        log_in(client, "olga")
        form = client.get("/actions/trigger", params={"dag_id": "etl"})
        request_id = re.search(r'name="request_id" value="([^"]+)"', form.text)
        assert request_id, "the confirmation form carries its request id"
        data = {"dag_id": "etl", "csrf": csrf_in(form.text), "conf": "{}", "request_id": request_id.group(1)}
        for _ in range(2):  # a retry of the same confirmation (after a 503, a double click, a reload)
            assert client.post("/actions/trigger", data=data, follow_redirects=False).status_code == 303
    triggers = [record.event for record in replay(projection_settings, EVENTS)
                if isinstance(record.event, TriggerDagRun)]
    assert len(triggers) == 2 and {trigger.request_id for trigger in triggers} == {request_id.group(1)}


def test_a_ui_confirm_with_a_malformed_request_id_is_refused(projection_settings, engine):
    fold_into_tables(engine, [dag_parsed("etl", {"extract": []}, AT, schedule="@hourly"),
                              user_created("olga", "operator", AT)])
    with TestClient(create_app(projection_settings)) as client:
        log_in(client, "olga")
        form = client.get("/actions/trigger", params={"dag_id": "etl"})
        data = {"dag_id": "etl", "csrf": csrf_in(form.text), "conf": "{}", "request_id": "../x"}
        answer = client.post("/actions/trigger", data=data, follow_redirects=False)
    assert answer.status_code == 409 and "bad request id" in answer.text
