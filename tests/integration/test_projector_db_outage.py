"""PostgreSQL stops for 15 s mid-stream: the projector retries, advances nothing, and catches up.

This stops the PostgreSQL shared by every test of the session: run it last, alone.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from projections.db import create_tables, open_engine
from projections.rebuild import verify
from tests.conftest import SCRIPTS, _infra_home
from tests.integration.projection_db import (
    ProjectorThread,
    log_end,
    many_runs,
    offsets_reached,
    postgres_schema_url,
    produce,
    wait_for,
)

pytestmark = pytest.mark.integration
OUTAGE_SECONDS = 15


def _postgres(action: str) -> None:
    subprocess.run(["bash", str(SCRIPTS / "postgres.sh"), action], check=True, capture_output=True,
                   env={**os.environ, "STATE_DIR": str(_infra_home())})


@pytest.fixture
def postgres_settings(make_settings, postgres_url, kafka_settings):
    for url in postgres_schema_url(postgres_url):
        yield make_settings(db_url=url)


def test_a_database_outage_advances_nothing_and_is_caught_up(postgres_settings):
    engine = open_engine(postgres_settings)
    create_tables(engine)
    events = many_runs(200)
    produce(postgres_settings, events[:5000])
    with ProjectorThread(postgres_settings, records=500):
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), what="the first half projected")
        _postgres("stop")
        try:
            produce(postgres_settings, events[5000:])  # arrives while the database is down
            time.sleep(OUTAGE_SECONDS)
        finally:
            _postgres("start")
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), timeout=90,
                 what="the projector to catch up after the outage")
    assert verify(postgres_settings, engine) == []
    engine.dispose()


def test_a_projector_started_while_the_database_is_away_waits_for_it(postgres_settings):
    # The 30-minute soak restarted the projector during a PostgreSQL restart: it exited 1 at start-up
    # ("connection refused" from creating its tables) where it waits for the database once running.
    events = many_runs(20)
    produce(postgres_settings, events)
    _postgres("stop")
    try:
        projector = ProjectorThread(postgres_settings, records=500).__enter__()
        time.sleep(5)  # the outage it must outlast (it retries with backoff meanwhile)
        assert projector.thread.is_alive(), "the projector ended while the database was away"
    finally:
        _postgres("start")
    engine = open_engine(postgres_settings)
    try:
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), timeout=90,
                 what="the projector to start projecting once the database is back")
    finally:
        projector.__exit__(None, None, None)
        engine.dispose()
