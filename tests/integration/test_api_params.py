"""A conf the DAG's params refuse never reaches the log from the API or the web UI: 422 naming the param
and the rule; the UI's trigger form is generated from the params and keeps what was typed. Real broker
and SQLite."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

import pytest
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import EVENTS, RequestBackfill, TriggerDagRun
from schemas.params import ParamSpec, to_json
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import csrf_in, dag_parsed, fold_into_tables, log_in, user_created

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]
AT = 1_700_000_000.0
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PARAMS = to_json([
    ParamSpec("x", {"type": "integer", "maximum": 20, "title": "How many"}, "a count", True, 5),
    ParamSpec("who", {"type": "string", "minLength": 2}, "whom to greet", False),
    ParamSpec("color", {"enum": ["red", "blue"]}, None, True, "red"),
    ParamSpec("loud", {"type": "boolean"}, None, True, False),
    ParamSpec("cfg", {"type": "object"}, None, True, {"a": 1}),
])


@pytest.fixture
def client(make_settings, projection_settings, engine):
    fold_into_tables(engine, [dag_parsed("etl", {"extract": []}, AT, schedule="@hourly", params_json=PARAMS),
                              user_created("olga", "operator", AT)])
    settings = make_settings(db_url=projection_settings.db_url, api_token=TOKEN)
    with TestClient(create_app(settings)) as client:
        yield client


def _appended(settings, kind) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, kind)]


def test_the_dag_shows_its_params(client):
    params = client.get("/api/v1/dags/etl", headers=AUTH).json()["params"]
    assert [param["name"] for param in params] == ["x", "who", "color", "loud", "cfg"]
    assert params[0] == {"name": "x", "schema": {"type": "integer", "maximum": 20, "title": "How many"},
                         "description": "a count", "default": 5}


@pytest.mark.parametrize(("conf", "rules"), [
    ({"who": "ada", "x": "abc"}, ["param 'x': 'abc' is not of type 'integer'"]),
    ({"x": 21}, ["param 'x': 21 is greater than the maximum of 20",
                 "param 'who': required: it has no default and the conf does not give it"]),
    ({"who": "ada", "color": "green"}, ["param 'color': 'green' is not one of ['red', 'blue']"]),
])
def test_a_trigger_whose_conf_the_params_refuse_is_422_naming_the_param_and_the_rule(
        client, make_settings, projection_settings, conf, rules):
    answer = client.post("/api/v1/dags/etl/runs", json={"conf": conf}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    for rule in rules:
        assert rule in answer.json()["detail"]
    backfill = client.post("/api/v1/dags/etl/backfills", json={"start_date": "2024-01-01", "end_date": "2024-01-02",
                                                               "conf": conf}, headers=AUTH)
    assert backfill.status_code == 422 and rules[0] in backfill.json()["detail"]
    assert _appended(projection_settings, (TriggerDagRun, RequestBackfill)) == []


def test_a_conf_that_fits_is_appended(client, projection_settings):
    answer = client.post("/api/v1/dags/etl/runs", json={"conf": {"who": "ada", "x": 20}}, headers=AUTH)
    assert answer.status_code == 202, answer.text
    [trigger] = _appended(projection_settings, TriggerDagRun)
    assert json.loads(trigger.conf_json) == {"who": "ada", "x": 20}


def _inputs(page: str) -> dict[str, str]:
    """name -> value of the page's text inputs and textareas (as the browser would post them)."""
    found = {html.unescape(name): html.unescape(value)
             for name, value in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page)}
    found.update({html.unescape(name): html.unescape(value)
                  for name, value in re.findall(r'<textarea[^>]*name="([^"]+)"[^>]*>([^<]*)</textarea>', page)})
    return found


def test_the_trigger_form_has_an_input_per_param_and_keeps_what_was_typed_when_refused(client, projection_settings):
    log_in(client, "olga")
    form = client.get("/actions/trigger", params={"dag_id": "etl"})
    assert form.status_code == 200
    page = form.text
    assert "How many" in page and "a count" in page and "whom to greet" in page and "(required)" in page
    assert 'type="checkbox"' in page and "<select" in page and 'class="json"' in page
    assert 'name="logical_date"' in page
    inputs = _inputs(page)
    assert (inputs["param.x"], json.loads(inputs["param.cfg"])) == ("5", {"a": 1})
    typed = {"dag_id": "etl", "csrf": csrf_in(page), "request_id": inputs["request_id"], "param.x": "abc",
             "param.who": "ada", "param.color": '"blue"', "param.loud": "true", "param.cfg": '{"b": 2}',
             "logical_date": "2024-01-31T06:00:00+00:00", "conf": '{"extra": 1}'}
    refused = client.post("/actions/trigger", data=typed, follow_redirects=False)
    assert refused.status_code == 409  # (the UI's status for every refusal but a 503)
    assert "param &#39;x&#39;: &#39;abc&#39; is not of type &#39;integer&#39;" in refused.text  # the API's words
    assert "x: &#39;abc&#39; is not of type &#39;integer&#39;" in refused.text  # beside the input
    again = _inputs(refused.text)
    for name in ("param.x", "param.who", "param.cfg", "logical_date", "conf", "request_id"):
        assert again[name] == typed[name], name
    assert re.search(r'<option value="&#34;blue&#34;" selected>', refused.text)
    assert re.search(r'name="param.loud" value="true" checked', refused.text)
    assert _appended(projection_settings, TriggerDagRun) == []

    fixed = {**typed, "param.x": "7"}
    assert client.post("/actions/trigger", data=fixed, follow_redirects=False).status_code == 303
    [trigger] = _appended(projection_settings, TriggerDagRun)
    assert json.loads(trigger.conf_json) == {"x": 7, "who": "ada", "color": "blue", "loud": True,
                                             "cfg": {"b": 2}, "extra": 1}
    assert trigger.logical_date == dt.datetime(2024, 1, 31, 6, tzinfo=dt.UTC).timestamp()
