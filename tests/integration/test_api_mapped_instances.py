"""One instance of a mapped task through the API, the CLI's targets and the web UI: its own log, and a
clear, mark or kill of that index alone (real broker and database; the scheduler's side of a clear of
one index is in tests/unit/test_mapping_core.py)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from fastapi.testclient import TestClient

from infra.log import KafkaEventLog, replay
from schemas import (
    EVENTS,
    ClearTask,
    DagRunCreated,
    KillTask,
    MapDefinition,
    MapInput,
    MarkTask,
    TaskLogShipped,
    TaskMapExpanded,
)
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import fold_into_tables, log_in, user_created
from tests.unit.projection_logs import dag_parsed, lifecycle

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
TOKEN = "mapped-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN_ID = "manual__mapped"
BASE = f"/api/v1/dags/fan/runs/{RUN_ID}/tasks"
COUNT = 3


def _mapped_dag():
    parsed = dag_parsed("fan", AT, tasks=("numbers", "double", "plain"))
    tasks = [dataclasses.replace(task, mapped=MapDefinition(inputs=[MapInput(name="x", task_id="numbers")]),
                                 upstream=["numbers"]) if task.task_id == "double" else task
             for task in parsed.definition.tasks]
    return dataclasses.replace(parsed, definition=dataclasses.replace(parsed.definition, tasks=tasks))


def _instance_events() -> list:
    """A run in which ``double`` expanded to 3 instances; 0 and 1 succeeded, 2 is running."""
    events = [_mapped_dag(), DagRunCreated(dag_id="fan", run_id=RUN_ID, logical_date=AT, run_type="manual",
                                           dag_fingerprint="f", scheduler_id="s1", at=AT)]
    events += lifecycle("fan", RUN_ID, "numbers", 1, AT + 1)
    events.append(TaskMapExpanded(dag_id="fan", run_id=RUN_ID, task_id="double", count=COUNT, scheduler_id="s1",
                                  at=AT + 3))
    for index in range(COUNT):
        tried = lifecycle("fan", RUN_ID, "double", 1, AT + 4 + index, outcome="success")
        events += [dataclasses.replace(event, map_index=index) for event in (tried if index < 2 else tried[:4])]
    return events


@pytest.fixture
def mapped(projection_settings, engine):
    fold_into_tables(engine, [*_instance_events(), user_created("olga", "operator", AT)])
    with KafkaEventLog(projection_settings) as logs:
        for index in range(COUNT):
            logs.append(TaskLogShipped(dag_id="fan", run_id=RUN_ID, task_id="double", map_index=index, try_number=1,
                                       runner_id="r", offset=0, text=f"instance {index} says hello\n",
                                       final=index < 2, at=time.time()))
    with TestClient(create_app(projection_settings.model_copy(update={"api_token": TOKEN})), headers=AUTH) as client:
        yield client


def test_each_instance_has_its_own_log(mapped):
    for index in range(COUNT):
        answer = mapped.get(f"{BASE}/double/logs", params={"map_index": index})
        assert (answer.status_code, answer.text) == (200, f"instance {index} says hello\n")
    whole = mapped.get(f"{BASE}/double/logs")
    assert whole.status_code == 404 and "map_index" in whole.json()["detail"]
    past = mapped.get(f"{BASE}/double/logs", params={"map_index": 7})
    assert past.status_code == 404 and "double[7]" in past.json()["detail"]
    assert mapped.get(f"{BASE}/double/logs", params={"map_index": -2}).status_code == 422


def _commands(settings, kind) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, kind)]


def test_clear_mark_and_kill_name_one_index(mapped, projection_settings):
    for path, body, key in [("clear", None, "c1"), ("mark", {"state": "failed"}, "m1")]:
        answer = mapped.post(f"{BASE}/double/{path}", params={"map_index": 1}, json=body,
                             headers={**AUTH, "Idempotency-Key": key})
        assert answer.status_code == 202, answer.text
    killed = mapped.post(f"{BASE}/double/kill", params={"map_index": 2}, headers={**AUTH, "Idempotency-Key": "k2"})
    assert killed.status_code == 202, killed.text
    done = mapped.post(f"{BASE}/double/kill", params={"map_index": 0}, headers={**AUTH, "Idempotency-Key": "k0"})
    assert done.status_code == 409 and "double[0]" in done.json()["detail"]  # it succeeded: no try to kill
    assert [(event.task_id, event.map_index) for event in _commands(projection_settings, ClearTask)] == [("double", 1)]
    assert [(event.map_index, event.state) for event in _commands(projection_settings, MarkTask)] == [(1, "failed")]
    assert [event.map_index for event in _commands(projection_settings, KillTask)] == [2]


def test_a_map_index_of_a_task_that_is_not_mapped_is_refused(mapped):
    answer = mapped.post(f"{BASE}/plain/clear", params={"map_index": 0}, headers={**AUTH, "Idempotency-Key": "p"})
    assert answer.status_code == 409 and "not mapped" in answer.json()["detail"]


def test_the_task_page_lists_the_instances_and_shows_one(mapped):
    log_in(mapped, "olga")
    whole = mapped.get(f"/dags/fan/runs/{RUN_ID}/tasks/double")
    assert whole.status_code == 200
    assert "Mapped instances" in whole.text
    for index in range(COUNT):
        assert f'href="/dags/fan/runs/{RUN_ID}/tasks/double?map_index={index}"' in whole.text
    one = mapped.get(f"/dags/fan/runs/{RUN_ID}/tasks/double", params={"map_index": 1})
    assert one.status_code == 200 and "instance 1 says hello" in one.text and "Mapped instances" not in one.text
    assert "instance 0 says hello" not in one.text
    assert f'data-follow="/ui/log/dags/fan/runs/{RUN_ID}/tasks/double?map_index=1"' in one.text
    confirm = mapped.get("/actions/clear", params={"dag_id": "fan", "run_id": RUN_ID, "task_id": "double",
                                                   "map_index": 1})
    assert "Clear double[1]" in confirm.text and 'name="map_index" value="1"' in confirm.text


def test_the_grid_and_graph_show_a_mapped_task_as_its_instances_as_a_whole(mapped):
    log_in(mapped, "olga")
    grid = mapped.get("/dags/fan").text
    # two instances succeeded, one runs: the cell is running (not whichever instance's row came last)
    assert f'aria-label="double in {RUN_ID}: running, 3 mapped instances"' in grid and "<sub>[3]</sub>" in grid
    assert f'aria-label="numbers in {RUN_ID}: success, try 1"' in grid
    graph = mapped.get("/dags/fan/graph").text
    assert 'data-task="double"' in graph and 'data-state="running"' in graph
