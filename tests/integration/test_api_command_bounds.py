"""Commands the API must refuse or answer honestly (issue 20, items 3, 4 and 18): dates the scheduler
cannot compute with, confs too large for a record, producer failures, and retries of a UI confirm.
Real broker, SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import EVENTS, RequestBackfill, TriggerDagRun
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed, fold_into_tables, user_created

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
TOKEN = "a-test-admin-token-of-32-characters!"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _dags() -> list:
    return [dag_parsed("etl", {"extract": [], "load": ["extract"]}, AT, schedule="@hourly"),
            dag_parsed("yearly", {"only": []}, AT, schedule="@yearly"),
            dag_parsed("leap", {"only": []}, AT, schedule="0 0 29 2 *"),
            user_created("olga", "operator", AT)]


@pytest.fixture
def settings(make_settings, projection_settings, engine):
    fold_into_tables(engine, _dags())
    return make_settings(db_url=projection_settings.db_url, api_token=TOKEN)


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings), headers=AUTH) as client:
        yield client


def _appended(settings, kind) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, kind)]


@pytest.mark.parametrize("logical_date", ["1e300", "-1e300", "NaN", "Infinity"])
def test_a_trigger_with_a_logical_date_out_of_range_is_422_with_the_reason(client, settings, logical_date):
    # JSON text by hand: NaN and Infinity are what a client's json.dumps writes for those floats.
    answer = client.post("/api/v1/dags/etl/runs", content=f'{{"logical_date": {logical_date}}}',
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert "logical_date" in answer.json()["detail"] and "between the years 1970 and 9998" in answer.json()["detail"]
    assert _appended(settings, TriggerDagRun) == []


def test_a_conf_holding_nan_is_422(client):
    answer = client.post("/api/v1/dags/etl/runs", content='{"conf": {"x": NaN}}',
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and "finite" in answer.json()["detail"], answer.text


@pytest.mark.parametrize(("dag_id", "start", "end"), [("yearly", "9999-06-01", "9999-12-29"),
                                                      ("yearly", 1e300, 2e300),
                                                      ("leap", "9990-06-01", "9998-12-29")])
def test_a_backfill_whose_runs_would_pass_the_year_9999_is_422_with_the_reason(client, settings, dag_id, start, end):
    answer = client.post(f"/api/v1/dags/{dag_id}/backfills", json={"start_date": start, "end_date": end})
    assert answer.status_code == 422, answer.text
    assert re.search(r"years 1970 and 9998|past the year 9999", answer.json()["detail"]), answer.text
    assert _appended(settings, RequestBackfill) == []


def test_a_backfill_ending_in_9998_is_taken(client, settings):
    answer = client.post("/api/v1/dags/yearly/backfills", json={"start_date": "9990-06-01", "end_date": "9998-12-29"})
    assert answer.status_code == 202, answer.text


def test_a_conf_over_the_limit_is_422_naming_the_limit_and_the_size(client, settings):
    answer = client.post("/api/v1/dags/etl/runs", json={"conf": {"blob": "x" * 1_100_000}})
    assert answer.status_code == 422, answer.text
    assert "1100012 bytes" in answer.json()["detail"] and "TOCK_API_CONF_LIMIT_BYTES" in answer.json()["detail"]
    backfill = client.post("/api/v1/dags/etl/backfills", json={"start_date": "2024-01-01", "end_date": "2024-01-02",
                                                               "conf": {"blob": "x" * 1_100_000}})
    assert backfill.status_code == 422 and "TOCK_API_CONF_LIMIT_BYTES" in backfill.json()["detail"]
    assert _appended(settings, TriggerDagRun) == []


def test_a_record_the_producer_refuses_is_503_saying_it_was_not_appended(make_settings, settings):
    # A limit raised past what the producer takes (1 MB messages): librdkafka refuses the record itself.
    generous = make_settings(db_url=settings.db_url, api_token=TOKEN, api_conf_limit_bytes=5_000_000)
    with TestClient(create_app(generous), headers=AUTH) as client:
        answer = client.post("/api/v1/dags/etl/runs", json={"conf": {"blob": "x" * 1_100_000}},
                             headers={"Idempotency-Key": "big-1"})
    assert answer.status_code == 503, answer.text
    assert "not appended" in answer.json()["detail"] and "big-1" in answer.json()["detail"]


def test_a_503_after_an_unacknowledged_flush_says_the_command_may_be_in_the_log(make_settings, settings):
    nowhere = make_settings(db_url=settings.db_url, api_token=TOKEN, kafka_bootstrap="127.0.0.1:9")
    with TestClient(create_app(nowhere), headers=AUTH) as client:
        answer = client.post("/api/v1/dags/etl/runs", json={}, headers={"Idempotency-Key": "maybe-1"})
    assert answer.status_code == 503, answer.text
    detail = answer.json()["detail"]
    assert "may still have been appended" in detail and "Idempotency-Key maybe-1" in detail
