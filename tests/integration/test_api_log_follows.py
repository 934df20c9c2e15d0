"""Following a try's log is bounded (issue 20, item 17): a try that does not exist is a 404, not a stream
for ever; a user holds at most TOCK_API_LOG_FOLLOWS_PER_USER follows at once; a follow ends after
TOCK_API_LOG_FOLLOW_SECONDS. Real broker, uvicorn over HTTP, SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest

from schemas import DagRunCreated, TaskQueued, TaskStarted
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
from tests.integration.test_api_logs import IDS, LOGS, Server, ship
from tests.unit.projection_logs import dag_parsed

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0


@pytest.fixture
def running_try(projection_settings, engine):
    """A running try 1 of "load" that shipped one line and never ends."""
    created = DagRunCreated(dag_id="etl", run_id=IDS["run_id"], logical_date=AT, run_type="scheduled",
                            dag_fingerprint="f", scheduler_id="s1", at=AT)
    produce(projection_settings, [dag_parsed("etl", AT, tasks=("extract", "load")), created,
                                  TaskQueued(**IDS, executor="local", queue="default", scheduler_id="s1", at=AT + 1),
                                  TaskStarted(**IDS, runner_id="w", hostname="h", pid=1, at=AT + 2)])
    ship(projection_settings, 0, "running\n")
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector")


def _url(base: str) -> str:
    return base + LOGS.format(run_id=IDS["run_id"])


def test_following_a_try_that_does_not_exist_is_404(make_settings, projection_settings, running_try):
    settings = make_settings(db_url=projection_settings.db_url, api_token=ADMIN_TOKEN)
    with Server(create_app(settings)) as base:
        answer = httpx.get(_url(base), params={"try": 999, "follow": "true"}, headers=ADMIN, timeout=10)
    assert answer.status_code == 404 and "try 999" in answer.text


def test_a_user_holds_a_bounded_number_of_follows(make_settings, projection_settings, running_try):
    settings = make_settings(db_url=projection_settings.db_url, api_token=ADMIN_TOKEN, api_log_follows_per_user=2)
    with Server(create_app(settings)) as base, httpx.Client(headers=ADMIN, timeout=30) as http:
        follow = {"follow": "true"}
        with http.stream("GET", _url(base), params=follow) as first, http.stream("GET", _url(base), params=follow):
            assert next(first.iter_bytes()) == b"running\n"
            refused = http.get(_url(base), params=follow)
            assert refused.status_code == 429 and "TOCK_API_LOG_FOLLOWS_PER_USER" in refused.text
            assert http.get(_url(base)).status_code == 200  # reading without following is not bounded
        # both follows ended with their clients: a new one is taken
        wait_for(lambda: _follow_taken(http, _url(base)), timeout=15, what="the follows' slots to be released")


def _follow_taken(http: httpx.Client, url: str) -> bool:
    with http.stream("GET", url, params={"follow": "true"}) as response:
        return response.status_code == 200


def test_a_follow_ends_after_the_longest_follow_time(make_settings, projection_settings, running_try):
    settings = make_settings(db_url=projection_settings.db_url, api_token=ADMIN_TOKEN, api_log_follow_seconds=3)
    with Server(create_app(settings)) as base:
        started = time.monotonic()
        answer = httpx.get(_url(base), params={"follow": "true"}, headers=ADMIN, timeout=30)
    assert answer.status_code == 200 and answer.text == "running\n"
    assert answer.headers["X-Tock-Follow-Seconds"] == "3"
    assert 2.5 < time.monotonic() - started < 15
