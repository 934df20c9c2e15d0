"""A task's values on its page: what its success passed on, its rendered fields, and, in the timeline,
which upstream try a queued try reads. Through the real app (TestClient) over the projection tables."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from schemas import DagRunCreated, TaskQueued, TaskStarted, TaskSucceeded, TryInput
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed, fold_into_tables, log_in, user_created
from tests.unit.projection_logs import lifecycle

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
RUN = "manual__v1"
SCRIPT = "<script>alert(1)</script>"
VALUES = json.dumps({"return_value": {"total": 12.5, "note": SCRIPT}})


def _events() -> list:
    ids = {"dag_id": "flow", "run_id": RUN, "try_number": 1}
    return [dag_parsed("flow", {"extract": [], "load": ["extract"]}, AT),
            DagRunCreated(dag_id="flow", run_id=RUN, logical_date=AT, run_type="manual", dag_fingerprint="fp",
                          scheduler_id="s1", at=AT),
            *lifecycle("flow", RUN, "extract", 1, AT + 1)[:-1],
            TaskSucceeded(**ids, task_id="extract", runner_id="runner-1", values_json=VALUES,
                          rendered_json=json.dumps({"op_args": [], "op_kwargs": {"day": "2023-11-14"}}), at=AT + 2),
            TaskQueued(**ids, task_id="load", executor="local", queue="default", scheduler_id="s1",
                       inputs=[TryInput(task_id="extract", try_number=1, values_json=VALUES)], at=AT + 3),
            TaskStarted(**ids, task_id="load", runner_id="r", hostname="h", pid=1, at=AT + 4)]


TOKEN = "values-token-" + "x" * 24


@pytest.fixture
def client(projection_settings, engine):
    fold_into_tables(engine, [*_events(), user_created("vic", "viewer", AT)])
    with TestClient(create_app(projection_settings.model_copy(update={"api_token": TOKEN}))) as client:
        log_in(client, "vic")
        yield client


def test_the_task_page_shows_what_the_success_passed_on_and_what_was_rendered(client):
    html = client.get(f"/dags/flow/runs/{RUN}/tasks/extract").text
    assert '<pre class="values" id="values">' in html and '&#34;total&#34;: 12.5' in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert '<pre class="rendered" id="rendered">' in html and "2023-11-14" in html
    assert 'data-values="TaskSucceeded"' in html


def test_the_timeline_of_a_queued_try_names_the_upstream_try_it_reads(client):
    html = client.get(f"/dags/flow/runs/{RUN}/tasks/load").text
    assert 'data-values="TaskQueued">reads extract#1</code>' in html
    assert '<pre class="values"' not in html  # no success yet: nothing passed on


def test_the_api_returns_a_task_instances_values(client):
    found = client.get(f"/api/v1/dags/flow/runs/{RUN}/tasks/extract",
                       headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert found["values"] == json.loads(VALUES) and found["rendered"]["op_kwargs"] == {"day": "2023-11-14"}
