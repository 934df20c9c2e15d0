"""The web UI's pages through the real app (TestClient), logged in through the login form: the DAG list's
filters and next run, a DAG's Graph and Runs tabs, DAG files, the cluster, and the backfill, trigger-with-conf
and clear-with-downstream forms, whose commands are read back from the real broker. SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest
from fastapi.testclient import TestClient

from infra.log import replay
from schemas import (
    EVENTS,
    ClearTask,
    DagFileProcessed,
    DagParseFailed,
    DagRunCreated,
    DagRunFinished,
    PauseDag,
    RequestBackfill,
    SchedulerHeartbeat,
    TaskQueued,
    TaskStarted,
    TriggerDagRun,
    WorkerHeartbeat,
)
from services.api.app import create_app
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import csrf_in, dag_parsed, fold_into_tables, log_in, user_created
from tests.unit.projection_logs import lifecycle

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
DAY = 86_400.0
JAN_1 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()
SCRIPT = "<script>alert(1)</script>"
WIDE = 208


def _run(dag_id: str, run_id: str, logical: float, at: float, run_type: str = "scheduled", conf=None) -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=logical, run_type=run_type,
                         conf_json=json.dumps(conf or {}), dag_fingerprint="fp", scheduler_id="s-alive", at=at)


def _etl() -> list:
    """etl: extract -> transform -> load -> report, daily with catch-up from 2024-01-01; two scheduled runs
    (success, failed) and a running manual one whose conf holds a script tag."""
    ids = {"dag_id": "etl", "run_id": "manual__m1", "try_number": 1}
    return [dag_parsed("etl", {"extract": [], "transform": ["extract"], "load": ["transform"], "report": ["load"]},
                       AT, schedule="@daily", start_date=JAN_1, catchup=True, tags=["finance", "nightly"]),
            _run("etl", "scheduled__2024-01-01", JAN_1, AT),
            DagRunFinished(dag_id="etl", run_id="scheduled__2024-01-01", state="success", at=AT + 100),
            _run("etl", "scheduled__2024-01-02", JAN_1 + DAY, AT + 200),
            DagRunFinished(dag_id="etl", run_id="scheduled__2024-01-02", state="failed", reason="load failed",
                           at=AT + 300),
            _run("etl", "manual__m1", AT + 400, AT + 400, "manual", {"note": SCRIPT}),
            *lifecycle("etl", "manual__m1", "extract", 1, AT + 401),
            TaskQueued(**ids, task_id="transform", executor="local", queue="default", scheduler_id="s-alive",
                       at=AT + 402),
            TaskStarted(**ids, task_id="transform", runner_id="r", hostname="h", pid=1, at=AT + 403),
            TaskQueued(**ids, task_id="load", executor="celery", queue="gpu", scheduler_id="s-alive", at=AT + 404)]


def _others() -> list:
    """other: unscheduled, tagged x, paused, never ran; wide: a 208-task fan-out between start and end."""
    fan = {"start": [], **{f"t{index}": ["start"] for index in range(WIDE)}, "end": [f"t{i}" for i in range(WIDE)]}
    return [dag_parsed("other", {"only": []}, AT, tags=["x"]), PauseDag(dag_id="other", paused=True, at=AT + 1),
            dag_parsed("wide", fan, AT), _run("wide", "manual__w", AT, AT, "manual"),
            *lifecycle("wide", "manual__w", "start", 1, AT + 1),
            DagRunFinished(dag_id="wide", run_id="manual__w", state="success", at=AT + 50)]


def _files_and_cluster(now: float) -> list:
    return [DagFileProcessed(file_path="/dags/etl.py", processor_id="p1", file_hash="h1", dag_ids=["etl"],
                             duration=0.25, at=AT),
            DagParseFailed(file_path="/dags/broken.py", processor_id="p1", file_hash="h2",
                           error="SyntaxError: invalid syntax", traceback="Traceback: line 3 of broken.py", at=AT),
            SchedulerHeartbeat(scheduler_id="s-alive", hostname="host-a", pid=11, partitions=[0, 1, 2], at=now),
            SchedulerHeartbeat(scheduler_id="s-dead", hostname="host-b", pid=12, partitions=[3], at=now - 3600),
            WorkerHeartbeat(worker="celery@w1", executor="celery", hostname="host-c", pid=13,
                            queues=["default", "gpu"], concurrency=4, at=now)]


@pytest.fixture
def ui(projection_settings, engine):
    now = time.time()
    fold_into_tables(engine, [*_etl(), *_others(), *_files_and_cluster(now),
                              user_created("olga", "operator", AT), user_created("vic", "viewer", AT)])
    # A session timeout far beyond how long the set-up takes on a busy machine (its password hashes
    # alone took 40 s once): s-alive reads alive, s-dead (an hour silent) dead.
    settings = projection_settings.model_copy(update={"scheduler_session_timeout": 300})
    with TestClient(create_app(settings)) as client:
        yield client


def _page(client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.text
    return response.text


def _dags(html: str) -> list[str]:
    return re.findall(r'<tr data-dag="([^"]+)"', html)


def test_pages_need_a_session(ui):
    for path in ("/dags/etl/graph", "/dags/etl/runs", "/dag-files", "/cluster"):
        answer = ui.get(path, follow_redirects=False)
        assert answer.status_code in (302, 303, 307) and answer.headers["location"].startswith("/login"), path


def test_the_dag_list_filters_by_id_tag_last_run_and_paused(ui):
    log_in(ui, "vic")
    assert _dags(_page(ui, "/")) == ["etl", "other", "wide"]
    assert _dags(_page(ui, "/?search=ET")) == ["etl"]
    assert _dags(_page(ui, "/?tag=x")) == ["other"]
    assert _dags(_page(ui, "/?last=running")) == ["etl"]
    assert _dags(_page(ui, "/?last=success")) == ["wide"]
    assert _dags(_page(ui, "/?last=none")) == ["other"]
    assert _dags(_page(ui, "/?paused=paused")) == ["other"]
    assert _dags(_page(ui, "/?paused=active")) == ["etl", "wide"]
    assert _dags(_page(ui, "/?search=nothing-like-it")) == []
    filtered = _page(ui, "/?tag=finance")
    assert 'data-live="/ui/live/dags?tag=finance"' in filtered  # the page's live updates keep the filter
    assert _dags(ui.get("/ui/live/dags?tag=finance").json()["html"]) == ["etl"]


def test_the_dag_list_shows_tags_and_the_next_scheduled_run(ui):
    log_in(ui, "vic")
    row = re.search(r'<tr data-dag="etl">.*?</tr>', _page(ui, "/"), re.S).group(0)
    assert '<a class="tag" href="/?tag=finance">finance</a>' in row and ">nightly</a>" in row
    # catch-up from 2024-01-01 with its latest scheduled run on 2024-01-02: the next is 2024-01-03
    assert '<td class="next-run">2024-01-03 00:00:00</td>' in row
    other = re.search(r'<tr data-dag="other">.*?</tr>', _page(ui, "/"), re.S).group(0)
    assert '<td class="next-run">—</td>' in other and "‖ paused" in other


def test_the_graph_shows_each_task_in_the_latest_run_state_with_its_edges(ui):
    log_in(ui, "vic")
    html = _page(ui, "/dags/etl/graph")
    states = dict(re.findall(r'data-task="([^"]+)" data-state="([^"]+)"', html))
    assert states == {"extract": "success", "transform": "running", "load": "queued", "report": "no state"}
    assert re.search(r'class="node success"[^>]*data-task="extract".*?✓ extract', html, re.S)
    assert html.count("<path d=") == 3 and "transform → load" in html
    assert 'href="/dags/etl/runs/manual__m1/tasks/extract"' in html
    assert re.search(r'<a href="/dags/etl/graph" aria-current="page">Graph</a>', html)
    assert ui.get("/ui/live/dags/etl/graph").json()["html"].count("<rect") == 4


def test_the_graph_of_a_dag_of_210_tasks_renders(ui):
    log_in(ui, "vic")
    started = time.perf_counter()
    html = _page(ui, "/dags/wide/graph")
    assert time.perf_counter() - started < 5
    assert html.count("<rect") == WIDE + 2 and html.count("<path d=") == 2 * WIDE
    assert ui.get("/dags/nope/graph").status_code == 404


def test_the_runs_tab_lists_runs_newest_first_with_their_conf_escaped(ui):
    log_in(ui, "vic")
    html = _page(ui, "/dags/etl/runs")
    assert re.findall(r'<tr data-run="([^"]+)"', html) == ["manual__m1", "scheduled__2024-01-02",
                                                            "scheduled__2024-01-01"]
    assert SCRIPT not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    first = re.search(r'<tr data-run="scheduled__2024-01-01">.*?</tr>', html, re.S).group(0)
    assert "✓" in first and "success" in first and "1m 40s" in first and "scheduled" in first
    assert "2024-01-01 00:00:00" in first  # the logical date
    failed = re.search(r'<tr data-run="scheduled__2024-01-02">.*?</tr>', html, re.S).group(0)
    assert "✗" in failed and "load failed" in failed
    assert "so far" in re.search(r'<tr data-run="manual__m1">.*?</tr>', html, re.S).group(0)


def test_dag_files_show_each_files_parse_status_and_import_error(ui):
    log_in(ui, "vic")
    html = _page(ui, "/dag-files")
    assert re.findall(r'<tr data-file="([^"]+)"', html) == ["/dags/broken.py", "/dags/etl.py"]
    etl = re.search(r'<tr data-file="/dags/etl.py">.*?</tr>', html, re.S).group(0)
    assert "✓" in etl and '<a href="/dags/etl">etl</a>' in etl and "250 ms" in etl
    broken = html.split('data-file="/dags/broken.py"')[1].split('data-file="/dags/etl.py"')[0]
    assert "✗" in broken and "SyntaxError: invalid syntax" in broken and "Traceback: line 3 of broken.py" in broken
    assert ui.get("/import-errors").url.path == "/dag-files"


def test_the_cluster_shows_schedulers_partitions_liveness_and_executors(ui):
    log_in(ui, "vic")
    html = _page(ui, "/cluster")
    alive = re.search(r'<tr data-scheduler="s-alive">.*?</tr>', html, re.S).group(0)
    assert "♥" in alive and "alive" in alive and '<td class="partitions">0, 1, 2</td>' in alive
    dead = re.search(r'<tr data-scheduler="s-dead">.*?</tr>', html, re.S).group(0)
    assert "☠" in dead and "dead" in dead
    celery = html.split('data-executor="celery"')[1].split("</section>")[0]
    assert re.search(r'<tr data-queue="gpu"><td>gpu</td><td>1</td><td>0</td></tr>', celery)
    worker = re.search(r'<tr data-worker="celery@w1">.*?</tr>', celery, re.S).group(0)
    assert "alive" in worker and "default, gpu" in worker and ">4<" in worker


def test_every_page_has_the_navigation_and_a_skip_link(ui):
    log_in(ui, "vic")
    for path in ("/", "/dags/etl", "/dags/etl/graph", "/dags/etl/runs", "/dag-files", "/cluster"):
        html = _page(ui, path)
        assert '<a class="skip" href="#content">Skip to content</a>' in html and '<main id="content"' in html
        assert all(f'href="{link}"' in html for link in ("/", "/dag-files", "/cluster")), path
    assert 'href="/actions/backfill?dag_id=etl"' in _page(ui, "/dags/etl")


def _commands(settings, *types) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, types)]


def _confirm(client, path: str, **fields) -> object:
    """Open a confirmation form and post it with its CSRF token and ``fields``."""
    form = client.get(path)
    assert form.status_code == 200, form.text
    return client.post(path.split("?")[0], data={"csrf": csrf_in(form.text), **fields}, follow_redirects=False)


def test_a_backfill_from_its_form_appends_request_backfill_through_the_api_function(ui, projection_settings):
    log_in(ui, "olga")
    assert 'name="start_date"' in _page(ui, "/actions/backfill?dag_id=etl")
    answer = _confirm(ui, "/actions/backfill?dag_id=etl", dag_id="etl", start_date="2024-02-01",
                      end_date="2024-02-03T00:00:00+00:00", reprocess_failed="true", conf='{"a": 1}')
    assert answer.status_code == 303 and answer.headers["location"] == "/dags/etl?done=RequestBackfill"
    [event] = _commands(projection_settings, RequestBackfill)
    feb_1 = dt.datetime(2024, 2, 1, tzinfo=dt.UTC).timestamp()
    assert (event.dag_id, event.start_date, event.end_date) == ("etl", feb_1, feb_1 + 2 * DAY)
    assert event.reprocess_failed and json.loads(event.conf_json) == {"a": 1} and event.requested_by == "olga"


def test_a_refused_backfill_shows_why_and_keeps_what_was_typed(ui, projection_settings):
    log_in(ui, "olga")
    backwards = _confirm(ui, "/actions/backfill?dag_id=etl", dag_id="etl", start_date="2024-02-03",
                         end_date="2024-02-01")
    assert backwards.status_code == 409 and "before it starts" in backwards.text
    assert 'value="2024-02-03"' in backwards.text
    unscheduled = _confirm(ui, "/actions/backfill?dag_id=other", dag_id="other", start_date="2024-02-01",
                           end_date="2024-02-02")
    assert unscheduled.status_code == 409 and "no schedule intervals" in unscheduled.text
    garbled = _confirm(ui, "/actions/backfill?dag_id=etl", dag_id="etl", start_date="yesterday", end_date="2024-02-02")
    assert garbled.status_code == 409 and "not an ISO 8601 date" in garbled.text
    assert _commands(projection_settings, RequestBackfill) == []
    log_in(ui, "vic")
    assert _confirm(ui, "/actions/backfill?dag_id=etl", dag_id="etl", start_date="2024-02-01",
                    end_date="2024-02-02").status_code == 403


def test_trigger_with_conf_and_clear_with_downstream_from_their_forms(ui, projection_settings):
    log_in(ui, "olga")
    triggered = _confirm(ui, "/actions/trigger?dag_id=etl", dag_id="etl", conf='{"k": [1, 2], "s": "x"}')
    assert triggered.status_code == 303, triggered.text
    cleared = _confirm(ui, "/actions/clear?dag_id=etl&run_id=scheduled__2024-01-02&task_id=transform",
                       dag_id="etl", run_id="scheduled__2024-01-02", task_id="transform", downstream="true")
    assert cleared.status_code == 303 and cleared.headers["location"].endswith("?done=ClearTask")
    not_an_object = _confirm(ui, "/actions/trigger?dag_id=etl", dag_id="etl", conf="[1, 2]")
    assert not_an_object.status_code == 409
    [trigger] = _commands(projection_settings, TriggerDagRun)
    assert json.loads(trigger.conf_json) == {"k": [1, 2], "s": "x"} and trigger.requested_by == "olga"
    [clear] = _commands(projection_settings, ClearTask)
    assert (clear.run_id, clear.task_id, clear.downstream, clear.requested_by) == (
        "scheduled__2024-01-02", "transform", True, "olga")
