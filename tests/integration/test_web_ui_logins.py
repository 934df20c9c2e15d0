"""Wrong-password limits that hold under concurrent guesses, cost the same for unknown user names, and key
on the real client behind a trusted proxy (issue 20, item 15). The real app, SQLite and PostgreSQL."""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import csrf_in, fold_into_tables, user_created

pytestmark = pytest.mark.integration
ATTEMPTS = 3


def _client(make_settings, projection_settings, engine, attempts: int):
    fold_into_tables(engine, [user_created("ann", "viewer", 1.0)])
    settings = make_settings(db_url=projection_settings.db_url, api_login_attempts=attempts,
                             api_trusted_proxies="testclient")
    return TestClient(create_app(settings))


@pytest.fixture
def client(make_settings, projection_settings, engine):
    with _client(make_settings, projection_settings, engine, ATTEMPTS) as client:
        yield client


@pytest.fixture
def patient_client(make_settings, projection_settings, engine):
    with _client(make_settings, projection_settings, engine, 100) as client:
        yield client


def _login(client, csrf: str, username: str, password: str, address: str = "198.51.100.7") -> int:
    return client.post("/login", data={"username": username, "password": password, "csrf": csrf, "next": "/"},
                       headers={"X-Forwarded-For": address}, follow_redirects=False).status_code


def test_concurrent_wrong_guesses_get_no_more_than_the_limit(client):
    csrf = csrf_in(client.get("/login").text)
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda index: _login(client, csrf, "ann", f"wrong-{index}"), range(12)))
    assert answers.count(303) <= ATTEMPTS and answers.count(429) >= 12 - ATTEMPTS, answers


def test_an_unknown_user_costs_a_password_hash_too(patient_client):
    client = patient_client
    csrf = csrf_in(client.get("/login").text)

    def seconds(username: str) -> float:
        started = time.perf_counter()
        assert _login(client, csrf, username, "wrong", address="203.0.113.9") == 303
        return time.perf_counter() - started

    known = statistics.median(seconds("ann") for _ in range(5))
    unknown = statistics.median(seconds("nobody") for _ in range(5))
    assert unknown > 0.4 * known, (known, unknown)  # argon2 takes tens of ms; a lookup alone well under 1 ms


def test_behind_a_trusted_proxy_the_limit_is_per_user_and_real_address(client):
    csrf = csrf_in(client.get("/login").text)
    for _ in range(ATTEMPTS):
        assert _login(client, csrf, "ann", "wrong", address="198.51.100.66") == 303
    assert _login(client, csrf, "ann", "wrong", address="198.51.100.66") == 429
    # Another client of the same proxy is not locked out by the first one's guesses.
    assert _login(client, csrf, "ann", "correct horse battery", address="192.0.2.10") == 303
    assert client.cookies.get("tock_session")
