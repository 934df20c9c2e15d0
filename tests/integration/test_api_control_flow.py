"""Why did this task not run? The scheduler's control-flow decisions appended to the real broker, projected
by the projector, and read back through the API (task instances and history) and `tock tasks history`.
SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.api.app import create_app
from tests.integration.api_support import ADMIN, ADMIN_TOKEN
from tests.integration.control_flow_support import DEDUPE_REASON, PARCEL_REASON, shop_run
from tests.integration.log_helpers import wait_for
from tests.integration.projection_db import (  # noqa: F401 - fixtures
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
)
from tests.scenarios.scheduler_support import environment
from tock_cli import app

pytestmark = pytest.mark.integration
RUN = "/api/v1/dags/shop/runs/r1/tasks"


@pytest.fixture
def projected(projection_settings, engine):
    produce(projection_settings, shop_run())
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), "the projector to catch up", 60)
    return projection_settings


@pytest.fixture
def client(projected, make_settings):
    settings = make_settings(db_url=projected.db_url, api_token=ADMIN_TOKEN)
    with TestClient(create_app(settings), headers=ADMIN) as client:
        yield client


def _get(client, path: str, **params) -> dict:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_skipped_instance_says_its_reason_rule_upstream_states_and_branch(client):
    parcel = _get(client, f"{RUN}/parcel")
    assert {name: parcel[name] for name in ("state", "reason", "trigger_rule", "upstream_states", "chosen_by",
                                            "follow", "task_group", "is_setup", "is_teardown")} == {
        "state": "skipped", "reason": PARCEL_REASON, "trigger_rule": "all_success",
        "upstream_states": {"pick": "success"}, "chosen_by": "pick", "follow": None, "task_group": "",
        "is_setup": False, "is_teardown": False}


def test_an_upstream_failure_in_a_nested_group_and_a_branch_s_choice(client):
    dedupe = _get(client, f"{RUN}/crm.clean.dedupe")
    assert (dedupe["state"], dedupe["reason"], dedupe["upstream_states"], dedupe["chosen_by"],
            dedupe["task_group"]) == ("upstream_failed", DEDUPE_REASON, {"crm.fetch": "failed"}, None, "crm.clean")
    assert _get(client, f"{RUN}/pick")["follow"] == ["freight"]
    items = {item["task_id"]: item for item in _get(client, RUN)["items"]}
    assert (items["open_db"]["is_setup"], items["close_db"]["is_teardown"]) == (True, True)
    assert items["close_db"]["trigger_rule"] == "all_done_setup_success"  # its rule: no decision recorded one
    assert (items["shipped"]["state"], items["archive"]["state"], items["archive"]["reason"]) == (
        "success", "skipped", "nothing to archive today")


def test_history_items_carry_each_decision_typed_and_in_words(client):
    parcel = _get(client, f"{RUN}/parcel/history")
    (skip,) = parcel["items"]
    assert (skip["event_type"], skip["trigger_rule"], skip["upstream_states"], skip["chosen_by"]) == (
        "TaskSkipped", "all_success", {"pick": "success"}, "pick")
    assert skip["why"] == f"{PARCEL_REASON}; trigger rule all_success; upstream pick=success; chosen by pick"
    assert (parcel["task_group"], parcel["trigger_rule"]) == ("", "all_success")
    pick = _get(client, f"{RUN}/pick/history")["items"]
    assert [(item["event_type"], item["follow"], item["why"]) for item in pick][-1] == (
        "TaskSucceeded", ["freight"], "followed freight")
    assert all(item["why"] == "" and item["follow"] is None for item in pick[:-1])
    (empty,) = _get(client, f"{RUN}/shipped/history")["items"]
    assert empty["why"] == "an empty task: ended by scheduler s1, no try"
    archive = _get(client, f"{RUN}/archive/history")["items"][-1]
    assert (archive["reason"], archive["why"]) == (
        "nothing to archive today", "its code raised the skip exception; nothing to archive today")
    dedupe = _get(client, f"{RUN}/crm.clean.dedupe/history")
    assert (dedupe["task_group"], dedupe["items"][0]["upstream_states"]) == ("crm.clean", {"crm.fetch": "failed"})


def test_the_openapi_document_types_the_decision_fields_and_the_dag_s_groups(client):
    components = _get(client, "/openapi.json")["components"]["schemas"]
    instance = components["TaskInstance"]["properties"]
    assert instance["upstream_states"]["anyOf"][0] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert instance["follow"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert {"task_group", "is_setup", "is_teardown", "chosen_by"} <= set(instance)
    assert {"why", "reason", "trigger_rule"} <= set(components["TaskEvent"]["properties"])
    assert _get(client, "/api/v1/dags/shop")["task_groups"] == [
        {"group_id": "crm", "parent_id": "", "tooltip": "Customer records"},
        {"group_id": "crm.clean", "parent_id": "crm", "tooltip": "Dedupe <the> records"}]


def test_tock_tasks_history_says_why(projected):
    def history(task_id: str, *options: str):
        done = CliRunner().invoke(app, ["tasks", "history", "shop", "r1", task_id, *options],
                                  env=environment(projected))
        assert done.exit_code == 0, done.output
        return done.output

    (skip,) = json.loads(history("parcel", "--json"))
    assert skip["why"] == f"{PARCEL_REASON}; trigger rule all_success; upstream pick=success; chosen by pick"
    table = history("crm.clean.dedupe")
    assert "why" in table and "trigger rule all_success; upstream crm.fetch=failed" in table
    assert "followed freight" in history("pick")
    assert "an empty task: ended by scheduler s1, no try" in history("shipped")
    assert "its code raised the skip exception; nothing to archive today" in history("archive")
