"""The web UI over a run with control flow (tests/integration/control_flow_support.py), through the real app:
the task page says why a task did not run (reason, trigger rule, upstream states, the branch that chose) and
what a branch followed; the grid and the graph show the nested task groups, each with its tasks' state,
collapsible, and mark setup and teardown tasks. SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from tests.integration.control_flow_support import DEDUPE_REASON, PARCEL_REASON, shop_run
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import fold_into_tables, log_in, user_created

pytestmark = pytest.mark.integration
TASKS = "/dags/shop/runs/r1/tasks"


@pytest.fixture
def ui(projection_settings, engine):
    fold_into_tables(engine, [*shop_run(), user_created("vic", "viewer", 1.0)])
    with TestClient(create_app(projection_settings)) as client:
        log_in(client, "vic")
        yield client


def _page(client, path: str) -> str:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return answer.text


def _why(html: str) -> dict[str, str]:
    section = re.search(r'<section class="why".*?</section>', html, re.S).group(0)
    return {name: " ".join(re.sub(r"<[^>]+>", "", text).split())
            for name, text in re.findall(r'<dd data-why="([^"]+)">(.*?)</dd>', section, re.S)}


def test_the_task_page_says_why_a_skipped_task_did_not_run(ui):
    html = _page(ui, f"{TASKS}/parcel")
    assert "Why it did not run" in html
    why = _why(html)
    assert (why["reason"], why["trigger_rule"], why["chosen_by"]) == (
        PARCEL_REASON, "all_success", "pick did not choose it")
    assert 'data-upstream="pick" data-state="success"' in html and f'href="{TASKS}/pick"' in html
    timeline = re.search(r'<li data-event="TaskSkipped".*?</li>', html, re.S).group(0)
    assert f"{PARCEL_REASON}; trigger rule all_success; upstream pick=success; chosen by pick" in timeline
    assert "upstream_states=" not in timeline  # said once, in words


def test_the_task_page_of_an_upstream_failure_in_a_group_and_of_a_branch(ui):
    dedupe = _why(_page(ui, f"{TASKS}/crm.clean.dedupe"))
    assert (dedupe["reason"], dedupe["upstream_states"], dedupe["task_group"]) == (
        DEDUPE_REASON, "✗ crm.fetch failed", "crm.clean")
    assert "chosen_by" not in dedupe
    pick = _page(ui, f"{TASKS}/pick")
    assert _why(pick)["follow"] == "freight" and f'<a href="{TASKS}/freight">freight</a>' in pick
    assert "followed freight" in pick
    assert _why(_page(ui, f"{TASKS}/close_db"))["kind"] == "↧ teardown task"
    live = ui.get(f"/ui/live{TASKS}/parcel").json()["html"]
    assert _why(live)["reason"] == PARCEL_REASON  # the live fragment keeps it


def _rows(html: str) -> list[tuple[str, str, str]]:
    """(kind, id, the groups it is in) of each grid row, in order."""
    rows = []
    for row in re.findall(r"<tr[ >].*?</tr>", html.split("<tbody>")[1], re.S):
        group = re.match(r'<tr class="group-row" data-group="([^"]+)"', row)
        task = re.search(r'data-task="([^"]+)"', row)
        groups = re.search(r'^<tr[^>]*data-groups="([^"]*)"', row)
        rows.append(("group", group.group(1)) if group else ("task", task.group(1)))
        rows[-1] += (groups.group(1) if groups else "",)
    return rows


def test_the_grid_nests_task_groups_with_their_aggregate_state(ui):
    html = _page(ui, "/dags/shop")
    rows = _rows(html)
    crm = rows.index(("group", "crm", ""))
    assert rows[crm:crm + 4] == [("group", "crm", ""), ("task", "crm.fetch", "crm"), ("group", "crm.clean", "crm"),
                                 ("task", "crm.clean.dedupe", "crm crm.clean")]  # in definition order
    assert {row for row in rows if row[0] == "task" and not row[2]} >= {("task", "weigh", ""), ("task", "pick", "")}
    # a group's cell: its most telling task's state (crm.fetch failed, dedupe upstream_failed)
    assert re.search(r'<span class="cell failed" data-group="crm" data-state="failed"', html)
    assert re.search(r'<span class="cell upstream-failed" data-group="crm.clean" data-state="upstream_failed"', html)
    assert 'aria-expanded="true"' in html and "Customer records" in html
    assert "Dedupe &lt;the&gt; records" in html and "<the>" not in html  # a tooltip is escaped
    assert re.search(r'title="open_db \(setup task\)"[^>]*><span class="mark" aria-label="setup task">↥</span>', html)
    assert 'data-groups-all="collapse"' in html


def test_the_graph_frames_groups_and_collapses_them_on_request(ui):
    html = _page(ui, "/dags/shop/graph")
    frames = dict(re.findall(r'<g class="group-frame [^"]+" data-group="([^"]+)" data-state="([^"]+)"', html))
    assert frames == {"crm": "failed", "crm.clean": "upstream_failed"}
    assert 'href="/dags/shop/graph?collapsed=crm" data-fragment="/ui/live/dags/shop/graph?collapsed=crm"' in html
    assert re.search(r'class="node success setup" data-task="open_db"', html)
    assert 'class="setup-teardown"' in html  # open_db's edge to close_db is dashed
    collapsed = _page(ui, "/dags/shop/graph?collapsed=crm")
    assert 'data-live="/ui/live/dags/shop/graph?collapsed=crm"' in collapsed
    assert re.search(r'<a class="node group-node failed" href="/dags/shop/graph" [^>]*data-group="crm" '
                     r'data-state="failed" aria-expanded="false"', collapsed)
    assert 'data-task="crm.fetch"' not in collapsed and "group-frame" not in collapsed
    assert "open_db → crm" in collapsed and "crm → close_db" in collapsed  # its tasks' edges, on its box
    inner = ui.get("/ui/live/dags/shop/graph", params={"collapsed": "crm.clean,nope"}).json()["html"]
    assert re.search(r'class="node group-node upstream-failed"[^>]*data-group="crm.clean"', inner)
    assert 'data-group="crm" data-state="failed"' in inner and "nope" not in inner  # unknown groups are ignored
