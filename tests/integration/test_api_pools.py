"""Pools through the CLI, the API and the UI (real broker and database): `tock pools set` / the API's PUT
append SetPool to the pool's partition, DELETE a DeletePool; the lists read the pool table the projector
folds from the ledger; bad input is refused saying why, and default_pool (no cap in Tock) is refused."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from infra.log import partition_for, replay
from schemas import EVENTS, DeletePool, PoolSlotsGranted, PoolSlotsReleased, PoolSlotsRequested, SetPool
from schemas.routing import pool_partition_key
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import fold_into_tables, log_in, user_created
from tests.scenarios.scheduler_support import environment
from tock_cli import app as cli

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
TOKEN = "pools-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}
IDS = {"dag_id": "etl", "run_id": "r1", "map_index": -1, "try_number": 1}


def appended(settings) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, SetPool | DeletePool)]


def test_the_cli_sets_lists_and_deletes_a_pool(projection_settings, engine):
    runner = CliRunner()
    env = environment(projection_settings)
    done = runner.invoke(cli, ["pools", "set", "db", "3", "the warehouse"], env=env)
    assert done.exit_code == 0, done.output
    [event] = appended(projection_settings)
    assert (event.pool, event.slots, event.description, event.requested_by) == ("db", 3, "the warehouse", "cli")
    [record] = [record for record in replay(projection_settings, EVENTS) if isinstance(record.event, SetPool)]
    assert record.partition == partition_for(pool_partition_key("db"), projection_settings.partitions)

    fold_into_tables(engine, [event, PoolSlotsRequested(pool="db", slots=2, task_id="a", **IDS, at=AT),
                              PoolSlotsGranted(pool="db", slots=2, task_id="a", scheduler_id="s", **IDS, at=AT),
                              PoolSlotsRequested(pool="db", slots=1, task_id="b", **IDS, at=AT)])
    listed = runner.invoke(cli, ["pools", "list"], env=env)
    assert listed.exit_code == 0 and "db" in listed.output and "the warehouse" in listed.output
    assert "default_pool: no cap" in listed.output
    as_json = runner.invoke(cli, ["pools", "list", "--json"], env=env)
    assert '"occupied_slots": 2' in as_json.output and '"open_slots": 1' in as_json.output

    assert runner.invoke(cli, ["pools", "delete", "db"], env=env).exit_code == 0
    assert isinstance(appended(projection_settings)[-1], DeletePool)


@pytest.mark.parametrize("args, words", [
    (["pools", "set", "default_pool", "5"], "no cap in Tock"),
    (["pools", "set", ".bad", "5"], "a pool's name"),
    (["pools", "set", "db", "1000001"], "slots are 0 to"),
    (["pools", "delete", "nothing"], "no pool 'nothing'"),
])
def test_the_cli_refuses_bad_input_saying_why(projection_settings, engine, args, words):
    done = CliRunner().invoke(cli, args, env=environment(projection_settings))
    assert done.exit_code != 0 and words in done.output
    assert not appended(projection_settings)


@pytest.fixture
def api(projection_settings, engine):
    fold_into_tables(engine, [SetPool(pool="db", slots=3, description="warehouse", at=AT),
                              PoolSlotsRequested(pool="db", slots=1, task_id="a", **IDS, at=AT),
                              PoolSlotsGranted(pool="db", slots=1, task_id="a", scheduler_id="s", **IDS, at=AT),
                              PoolSlotsReleased(pool="db", slots=1, task_id="a", **IDS, at=AT + 1),
                              user_created("olga", "operator", AT)])
    with TestClient(create_app(projection_settings.model_copy(update={"api_token": TOKEN})), headers=AUTH) as client:
        yield client


def test_the_api_reads_and_changes_pools(api, projection_settings):
    [pool] = api.get("/api/v1/pools").json()
    assert (pool["pool"], pool["slots"], pool["occupied_slots"], pool["open_slots"]) == ("db", 3, 0, 3)
    assert api.get("/api/v1/pools/db").json()["description"] == "warehouse"
    assert api.get("/api/v1/pools/nope").status_code == 404
    changed = api.put("/api/v1/pools/db", json={"slots": 5}, headers={"Idempotency-Key": "resize-1"})
    assert changed.status_code == 202 and changed.json() == {"command": "SetPool", "pool": "db",
                                                             "request_id": "resize-1"}
    assert appended(projection_settings)[-1].slots == 5
    assert api.put("/api/v1/pools/default_pool", json={"slots": 5}).status_code == 409
    assert api.put("/api/v1/pools/db", json={"slots": -2}).status_code == 422
    assert api.put("/api/v1/pools/db", json={"slots": 2, "size": 9}).status_code == 422
    assert api.delete("/api/v1/pools/nope").status_code == 404
    assert api.delete("/api/v1/pools/db").status_code == 202


def test_the_ui_shows_each_pool(api):
    api.headers.pop("Authorization")
    log_in(api, "olga")
    page = api.get("/pools")
    assert page.status_code == 200 and 'data-pool="db"' in page.text and "warehouse" in page.text
    assert 'href="/pools"' in api.get("/").text
