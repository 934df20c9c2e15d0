"""PostgreSQL stops for 15 s mid-stream: the projector retries, advances nothing, and catches up.

Each test stops a PostgreSQL of its module's own (infra/scripts/postgres.sh on a free port), never the
session's shared one, so the tests running beside it in other processes keep their database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections.db import create_tables, open_engine
from projections.rebuild import verify
from tests.conftest import SCRIPTS
from tests.integration.projection_db import (
    ProjectorThread,
    log_end,
    many_runs,
    offsets_reached,
    postgres_schema_url,
    produce,
    wait_for,
)
from tests.scenarios.scheduler_support import free_port

pytestmark = pytest.mark.integration
OUTAGE_SECONDS = 15


class PrivatePostgres:
    """A PostgreSQL cluster of this module's own: started, stopped and restarted by the tests."""

    def __init__(self) -> None:
        port = free_port()
        self.state = Path(f"/var/tmp/tock-postgres-outage-{port}")  # reachable by the postgres user
        self.environment = {**os.environ, "PG_PORT": str(port), "PG_STATE_DIR": str(self.state)}
        self.url = ""

    def run(self, action: str) -> str:
        done = subprocess.run(["bash", str(SCRIPTS / "postgres.sh"), action], check=True, capture_output=True,
                              text=True, env=self.environment)
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    database = PrivatePostgres()
    database.url = database.run("start").replace("postgresql://", "postgresql+psycopg://", 1)
    yield database
    database.run("stop")
    shutil.rmtree(database.state, ignore_errors=True)


@pytest.fixture
def postgres_settings(make_settings, private_postgres, kafka_settings):
    for url in postgres_schema_url(private_postgres.url):
        yield make_settings(db_url=url)


def test_a_database_outage_advances_nothing_and_is_caught_up(postgres_settings, private_postgres):
    engine = open_engine(postgres_settings)
    create_tables(engine)
    events = many_runs(200)
    produce(postgres_settings, events[:5000])
    with ProjectorThread(postgres_settings, records=500):
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), what="the first half projected")
        private_postgres.run("stop")
        try:
            produce(postgres_settings, events[5000:])  # arrives while the database is down
            time.sleep(OUTAGE_SECONDS)
        finally:
            private_postgres.run("start")
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), timeout=90,
                 what="the projector to catch up after the outage")
    assert verify(postgres_settings, engine) == []
    engine.dispose()


def test_a_projector_started_while_the_database_is_away_waits_for_it(postgres_settings, private_postgres):
    # The 30-minute soak restarted the projector during a PostgreSQL restart: it exited 1 at start-up
    # ("connection refused" from creating its tables) where it waits for the database once running.
    events = many_runs(20)
    produce(postgres_settings, events)
    private_postgres.run("stop")
    try:
        projector = ProjectorThread(postgres_settings, records=500).__enter__()
        time.sleep(5)  # the outage it must outlast (it retries with backoff meanwhile)
        assert projector.thread.is_alive(), "the projector ended while the database was away"
    finally:
        private_postgres.run("start")
    engine = open_engine(postgres_settings)
    try:
        wait_for(lambda: offsets_reached(engine, log_end(postgres_settings)), timeout=90,
                 what="the projector to start projecting once the database is back")
    finally:
        projector.__exit__(None, None, None)
        engine.dispose()


def test_an_api_started_while_the_database_is_away_waits_for_it(postgres_settings, private_postgres):
    # The 30-minute soak restarted the API during a PostgreSQL restart: it exited 1 at start-up
    # ("connection refused" from creating its tables) where it waits for the database.
    from services.api.app import create_app

    private_postgres.run("stop")
    made = []
    try:
        maker = threading.Thread(target=lambda: made.append(create_app(postgres_settings)), daemon=True)
        maker.start()
        maker.join(5)  # the outage it must outlast (it retries with backoff meanwhile)
        assert maker.is_alive() and not made, "the API did not wait for the database"
    finally:
        private_postgres.run("start")
    maker.join(90)
    assert made, "the API did not start once the database was back"
    made[0].state.command_log.close()
    made[0].state.engine.dispose()
