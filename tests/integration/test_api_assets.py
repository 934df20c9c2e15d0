"""Assets through the CLI, the API and the UI (real broker and database): `tock assets event` / the API's POST
append an AssetEventRecorded to the asset's partition (its id api/<request id>, so a repeat is one event);
the lists read the asset and asset_event tables the projector folds from definitions, ledgers and runs;
bad input is refused saying why."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from infra.log import partition_for, replay
from schemas import (
    ASSET_TRIGGERED,
    EVENTS,
    AssetConsumerRegistered,
    AssetDefinition,
    AssetEventRecorded,
    DagDefinition,
    DagParsed,
    DagRemoved,
    DagRunCreated,
    TaskDefinition,
)
from schemas.routing import asset_partition_key
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import fold_into_tables, log_in, user_created
from tests.scenarios.scheduler_support import environment
from tests.unit.projection_logs import LogBuilder
from tock_cli import app as cli

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
TOKEN = "assets-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RAW, CLEAN = "s3://lake/raw", "s3://lake/clean"


def appended(settings) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, AssetEventRecorded)]


def named(uri: str) -> AssetDefinition:
    return AssetDefinition(uri=uri, name=uri.rsplit("/", 1)[-1])


def parsed(dag_id: str, at: float, outlets: dict[str, list[str]], schedule: tuple[str, ...] = ()) -> DagParsed:
    tasks = [TaskDefinition(task_id=task_id, kind="bash", command="true", outlets=[named(uri) for uri in uris])
             for task_id, uris in outlets.items()]
    condition = json.dumps({"all": [{"asset": uri} for uri in schedule]}) if schedule else ""
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=tasks,
                               asset_condition_json=condition, schedule_assets=[named(uri) for uri in schedule])
    return DagParsed(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", fingerprint=f"fp-{dag_id}-{at}",
                     definition=definition, at=at)


PRODUCED = AssetEventRecorded(uri=RAW, name="raw", event_id="etl|r1|load|-1|1|s3://lake/raw", source_dag_id="etl",
                              source_run_id="r1", source_task_id="load", source_try_number=1,
                              extra_json='{"rows": 5}', timestamp=AT + 10, at=AT + 10)


def triggered_run(*events: AssetEventRecorded) -> DagRunCreated:
    items = [{"uri": event.uri, "name": event.name, "group": event.group, "event_id": event.event_id,
              "extra_json": event.extra_json, "source_dag_id": event.source_dag_id,
              "source_run_id": event.source_run_id, "source_task_id": event.source_task_id,
              "source_map_index": event.source_map_index, "source_alias": event.source_alias,
              "timestamp": event.timestamp} for event in events]
    return DagRunCreated(dag_id="report", run_id="asset_triggered__1", logical_date=AT + 20, run_type=ASSET_TRIGGERED,
                         dag_fingerprint="fp-report", scheduler_id="s1", asset_events_json=json.dumps(items),
                         at=AT + 20)


def test_the_cli_appends_lists_and_shows_asset_events(projection_settings, engine):
    runner = CliRunner()
    env = environment(projection_settings)
    done = runner.invoke(cli, ["assets", "event", CLEAN, "--extra", '{"rows": 3}', "--name", "clean",
                               "--request-id", "by-hand-1"], env=env)
    assert done.exit_code == 0, done.output
    [event] = appended(projection_settings)
    assert (event.uri, event.name, event.event_id, event.extra_json, event.requested_by) == (
        CLEAN, "clean", "api/by-hand-1", '{"rows": 3}', "cli")
    [record] = [record for record in replay(projection_settings, EVENTS)
                if isinstance(record.event, AssetEventRecorded)]
    assert record.partition == partition_for(asset_partition_key(CLEAN), projection_settings.partitions)

    fold_into_tables(engine, [parsed("etl", AT, {"load": [RAW]}), PRODUCED, event, event, triggered_run(PRODUCED)])
    listed = runner.invoke(cli, ["assets", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    assert CLEAN in listed.output and "etl.load" in listed.output
    as_json = json.loads(runner.invoke(cli, ["assets", "list", "--json"], env=env).output)
    assert [(row["uri"], row["event_count"]) for row in as_json] == [(CLEAN, 1), (RAW, 1)]
    events = runner.invoke(cli, ["assets", "events", "--uri", RAW], env=env)
    assert events.exit_code == 0, events.output
    assert "etl.load (r1)" in events.output and "report/asset_triggered__1" in events.output
    assert "by cli" in runner.invoke(cli, ["assets", "events"], env=env).output


@pytest.mark.parametrize("args, words", [
    (["assets", "event", " "], "not blank"),
    (["assets", "event", "x" * 1501], "1 to 1500 characters"),
    (["assets", "event", RAW, "--extra", "[1]"], "--extra must be a JSON object"),
    (["assets", "event", RAW, "--extra", "{nope"], "--extra must be a JSON object"),
    (["assets", "event", RAW, "--extra", '{"a": NaN}'], "must be finite"),
    (["assets", "event", RAW, "--extra", json.dumps({"a": "x" * 70_000})], "at most 65536 bytes"),
    (["assets", "event", "a\x00b"], "NUL"),
])
def test_the_cli_refuses_bad_input_saying_why(projection_settings, engine, args, words):
    done = CliRunner().invoke(cli, args, env=environment(projection_settings))
    assert done.exit_code == 2 and words in done.output, done.output
    assert not appended(projection_settings)


@pytest.fixture
def builder() -> LogBuilder:
    """The log the tables were folded from, to fold more of it (a fresh one would start at offset 0 again)."""
    return LogBuilder()


@pytest.fixture
def api(projection_settings, engine, builder):
    api_event = AssetEventRecorded(uri=RAW, event_id="api/seen", requested_by="olga", timestamp=AT + 15, at=AT + 15)
    fold_into_tables(engine, [parsed("etl", AT, {"load": [RAW], "clean": [CLEAN]}),
                              parsed("report", AT, {}, schedule=(RAW,)),
                              AssetConsumerRegistered(uri=RAW, dag_id="report", at=AT + 1),
                              PRODUCED, api_event, triggered_run(PRODUCED, api_event),
                              user_created("olga", "operator", AT), user_created("vic", "viewer", AT)], builder)
    with TestClient(create_app(projection_settings.model_copy(update={"api_token": TOKEN})), headers=AUTH) as client:
        yield client


def test_the_api_lists_assets_with_their_producers_consumers_and_events(api):
    page = api.get("/api/v1/assets").json()
    assert (page["limit"], page["offset"], [row["uri"] for row in page["items"]]) == (100, 0, [CLEAN, RAW])
    raw = api.get(f"/api/v1/assets/{RAW}").json()
    assert raw == {"uri": RAW, "name": "raw", "group": "asset", "extra": {},
                   "producing_tasks": [{"dag_id": "etl", "task_id": "load"}], "consuming_dags": ["report"],
                   "defined_by": ["etl", "report"], "event_count": 2, "last_event_at": AT + 15,
                   "updated_at": AT + 15}
    assert api.get("/api/v1/assets/s3%3A%2F%2Flake%2Fraw").json()["uri"] == RAW
    assert api.get("/api/v1/assets/s3://lake/nothing").status_code == 404
    assert [row["uri"] for row in api.get("/api/v1/assets", params={"search": "CLE"}).json()["items"]] == [CLEAN]
    events = api.get("/api/v1/assets/events", params={"uri": RAW}).json()["items"]
    assert [event["event_id"] for event in events] == ["api/seen", PRODUCED.event_id]  # newest first
    assert events[1]["extra"] == {"rows": 5} and events[1]["source_task_id"] == "load"
    assert events[0]["consumed_by"] == [{"dag_id": "report", "run_id": "asset_triggered__1"}]
    assert api.get("/api/v1/assets/events", params={"uri": CLEAN}).json()["items"] == []
    only_etl = api.get("/api/v1/assets/events", params={"source_dag_id": "etl", "limit": 1}).json()
    assert [event["event_id"] for event in only_etl["items"]] == [PRODUCED.event_id] and only_etl["limit"] == 1


def test_a_definition_that_no_longer_names_an_asset_or_a_removed_dag_produces_nothing(api, engine, builder):
    fold_into_tables(engine, [parsed("etl", AT + 30, {"load": [CLEAN]})], builder)
    raw, clean = (api.get(f"/api/v1/assets/{uri}").json() for uri in (RAW, CLEAN))
    assert (raw["producing_tasks"], raw["defined_by"]) == ([], ["report"])
    assert clean["producing_tasks"] == [{"dag_id": "etl", "task_id": "load"}]
    fold_into_tables(engine, [DagRemoved(dag_id="etl", file_path="/dags/etl.py", at=AT + 40)], builder)
    assert api.get(f"/api/v1/assets/{CLEAN}").json()["producing_tasks"] == []


def test_the_api_appends_an_asset_event_once_per_idempotency_key(api, projection_settings):
    answer = api.post("/api/v1/assets/events", json={"uri": CLEAN, "extra": {"b": 1, "a": [2]}},
                      headers={"Idempotency-Key": "load-1"})
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"event_id": "api/load-1", "uri": CLEAN, "request_id": "load-1"}
    again = api.post("/api/v1/assets/events", json={"uri": CLEAN, "extra": {"b": 1, "a": [2]}},
                     headers={"Idempotency-Key": "load-1"})
    assert again.json() == answer.json()
    first, second = appended(projection_settings)
    assert (first.event_id, first.extra_json, first.requested_by, first.name) == (
        "api/load-1", '{"a": [2], "b": 1}', "api-token", "")
    assert second.event_id == first.event_id and first.timestamp == first.at
    generated = api.post("/api/v1/assets/events", json={"uri": RAW, "name": "raw"})
    assert generated.status_code == 202 and generated.json()["event_id"] == "api/" + generated.json()["request_id"]


@pytest.mark.parametrize("body, status, words", [
    ({"uri": " "}, 422, "not blank"),
    ({"uri": " s3://x"}, 422, "leading or trailing spaces"),
    ({"uri": "a\x00b"}, 422, "NUL"),
    ({"uri": RAW, "extra": [1]}, 422, "extra"),
    ({"uri": RAW, "extra": {"a": "x" * 70_000}}, 422, "at most 65536 bytes"),
    ({"uri": RAW, "size": 1}, 422, "size"),
    ({"name": "raw"}, 422, "uri"),
])
def test_the_api_refuses_bad_asset_events_saying_why(api, projection_settings, body, status, words):
    answer = api.post("/api/v1/assets/events", json=body)
    assert answer.status_code == status and words in answer.text, answer.text
    assert not appended(projection_settings)


def test_an_idempotency_key_of_another_asset_s_event_is_refused(api, projection_settings):
    answer = api.post("/api/v1/assets/events", json={"uri": CLEAN}, headers={"Idempotency-Key": "seen"})
    assert answer.status_code == 409 and RAW in answer.json()["detail"]
    assert not appended(projection_settings)


def test_a_viewer_reads_assets_but_cannot_append_events(api):
    api.headers.pop("Authorization")
    log_in(api, "vic")
    assert api.post("/api/v1/assets/events", json={"uri": RAW}).status_code == 401  # a session is not a token


def test_the_ui_shows_each_asset_with_its_producers_consumers_and_latest_events(api):
    api.headers.pop("Authorization")
    log_in(api, "olga")
    page = api.get("/assets")
    assert page.status_code == 200 and f'data-asset="{RAW}"' in page.text and f'data-asset="{CLEAN}"' in page.text
    row = page.text.split(f'data-asset="{RAW}"')[1].split("</tr>")[0]
    assert 'href="/dags/etl">etl</a>.load' in row and 'href="/dags/report">report</a>' in row
    assert 'data-event="api/seen"' in row and "by olga" in row and "asset_triggered__1" in row
    assert 'href="/assets"' in api.get("/").text
    live = api.get("/ui/live/assets").json()
    assert f'data-asset="{RAW}"' in live["html"] and live["version"]
