"""Hypothesis over the real app (issue 20): any JSON body posted to trigger or backfill is accepted and
appended to the real broker (202), or refused with a reason (409, 422); never a 500. SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.log import replay
from schemas import EVENTS, RequestBackfill, TriggerDagRun
from services.api.app import create_app
from tests.command_bodies import SCHEDULES, backfill_bodies, trigger_bodies
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed, fold_into_tables

pytestmark = pytest.mark.integration
TOKEN = "a-test-admin-token-of-32-characters!"
DAG_IDS = [f"d{index}" for index in range(len(SCHEDULES))]
QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])


@pytest.fixture
def client(make_settings, projection_settings, engine):
    fold_into_tables(engine, [dag_parsed(dag_id, {"only": []}, 1.0, schedule=schedule)
                              for dag_id, schedule in zip(DAG_IDS, SCHEDULES, strict=True)])
    app_settings = make_settings(db_url=projection_settings.db_url, api_token=TOKEN, api_conf_limit_bytes=4096)
    with TestClient(create_app(app_settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        client.accepted = []
        yield client


def _post(client, path: str, body: dict):
    answer = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert answer.status_code in (202, 409, 422), (body, answer.status_code, answer.text)
    if answer.status_code == 202:
        client.accepted.append(answer.json()["request_id"])
    else:
        assert answer.json()["detail"], body
    return answer


def _appended(settings, kind) -> set[str]:
    return {record.event.request_id for record in replay(settings, EVENTS) if isinstance(record.event, kind)}


@QUICK
@given(body=trigger_bodies(), dag_id=st.sampled_from(DAG_IDS))
def test_any_trigger_body_is_appended_or_refused_with_a_reason(client, projection_settings, body, dag_id):
    _post(client, f"/api/v1/dags/{dag_id}/runs", body)


@QUICK
@given(body=backfill_bodies(), dag_id=st.sampled_from(DAG_IDS))
def test_any_backfill_body_is_appended_or_refused_with_a_reason(client, projection_settings, body, dag_id):
    _post(client, f"/api/v1/dags/{dag_id}/backfills", body)


def test_what_was_accepted_is_in_the_log(client, projection_settings):
    for dag_id in DAG_IDS:
        _post(client, f"/api/v1/dags/{dag_id}/runs", {"conf": {"x": 1}, "logical_date": 1_700_000_000})
        _post(client, f"/api/v1/dags/{dag_id}/backfills", {"start_date": "2024-01-01", "end_date": "2024-01-03"})
    appended = _appended(projection_settings, TriggerDagRun) | _appended(projection_settings, RequestBackfill)
    assert set(client.accepted) <= appended and len(client.accepted) >= len(DAG_IDS)
