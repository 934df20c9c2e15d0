"""The web UI's pure parts: wrong-password limits, signed sessions and CSRF tokens, the grid."""

from __future__ import annotations

import pytest

from services.api.core import dag_list, graph_view, group_graph, login_limits, views
from services.api.ui import grid_html, sessions

LIMITS = login_limits.LoginLimits(attempts=3, window=60.0)
KEY = b"k" * 32


def test_logins_are_refused_after_too_many_wrong_passwords_until_the_window_passes():
    state = login_limits.Failures()
    for at in (0.0, 1.0, 2.0):
        assert login_limits.refused_for(state, "ann|h", at, LIMITS) == 0
        state = login_limits.failed(state, "ann|h", at, LIMITS)
    assert login_limits.refused_for(state, "ann|h", 3.0, LIMITS) == 57.0
    assert login_limits.refused_for(state, "bob|h", 3.0, LIMITS) == 0  # per user and address
    assert login_limits.refused_for(state, "ann|h", 60.0, LIMITS) == 0
    assert login_limits.refused_for(login_limits.succeeded(state, "ann|h"), "ann|h", 3.0, LIMITS) == 0


def test_failures_past_the_window_are_forgotten():
    state = login_limits.failed(login_limits.Failures(), "old", 0.0, LIMITS)
    state = login_limits.failed(state, "new", 100.0, LIMITS)
    assert set(state.by_key) == {"new"}


def test_sessions_are_signed_and_expire():
    session = sessions.Session("ann", 100.0, "nonce")
    cookie = sessions.encode_session(KEY, session)
    assert sessions.decode_session(KEY, cookie, 99.0) == session
    assert sessions.decode_session(KEY, cookie, 100.0) is None
    assert sessions.decode_session(b"x" * 32, cookie, 99.0) is None
    body, signature = cookie.split(".")
    assert sessions.decode_session(KEY, body[:-2] + "AA." + signature, 99.0) is None
    assert sessions.decode_session(KEY, None, 0) is None and sessions.decode_session(KEY, "garbage", 0) is None


def test_csrf_tokens_belong_to_their_nonce():
    token = sessions.csrf_token(KEY, "n1")
    assert sessions.csrf_matches(KEY, "n1", token)
    assert not sessions.csrf_matches(KEY, "n2", token)
    assert not sessions.csrf_matches(KEY, "n1", "") and not sessions.csrf_matches(KEY, None, token)


def test_the_grid_has_runs_oldest_first_and_a_symbol_per_state():
    runs = [{"run_id": "r2", "state": "running"}, {"run_id": "r1", "state": "success"}]
    instances = [{"run_id": "r1", "task_id": "a", "state": "success", "try_number": 1},
                 {"run_id": "r2", "task_id": "a", "state": "up_for_retry", "try_number": 2}]
    grid = views.grid([{"task_id": "a"}, {"task_id": "b"}], runs, instances)
    assert [column["run_id"] for column in grid["columns"]] == ["r1", "r2"]
    assert [(cell["symbol"], cell["try_number"]) for cell in grid["rows"][0]["cells"]] == [("✓", 1), ("↻", 2)]
    assert [cell["css"] for cell in grid["rows"][1]["cells"]] == ["none", "none"]


def test_heartbeats_fold_into_one_timeline_line():
    history = [{"event_type": kind, "at": at, "payload": {}} for kind, at in
               [("TaskStarted", 1), ("TaskHeartbeat", 2), ("TaskHeartbeat", 3), ("TaskSucceeded", 4)]]
    items = views.timeline(history)
    assert [(item["event_type"], item["count"]) for item in items] == [
        ("TaskStarted", 1), ("TaskHeartbeat", 2), ("TaskSucceeded", 1)]
    assert items[1]["last_at"] == 3


# --- the DAG list, runs, files and cluster pages ---------------------------------------------

DAY = 86_400.0
JAN_1 = 1_704_067_200.0  # 2024-01-01T00:00:00Z


def _dag(dag_id: str, *, tags=(), paused=False, last=None, **row) -> dict:
    dots = [views.state_look(last)] if last else []
    return {"dag_id": dag_id, "tags": list(tags), "is_paused": paused, "dots": dots, "is_active": True, **row}


LISTED = [_dag("etl_daily", tags=["finance"], last="failed"), _dag("ETL_hourly", tags=["finance", "ops"],
                                                                   last="running", paused=True),
          _dag("report", last="success"), _dag("fresh")]


@pytest.mark.parametrize(("form", "expected"), [
    ({}, ["etl_daily", "ETL_hourly", "report", "fresh"]),
    ({"search": "etl"}, ["etl_daily", "ETL_hourly"]),
    ({"search": " ETL_H "}, ["ETL_hourly"]),
    ({"tag": "ops"}, ["ETL_hourly"]),
    ({"last": "failed"}, ["etl_daily"]),
    ({"last": "none"}, ["fresh"]),
    ({"paused": "paused"}, ["ETL_hourly"]),
    ({"paused": "active", "tag": "finance"}, ["etl_daily"]),
    ({"last": "bogus", "paused": "bogus"}, ["etl_daily", "ETL_hourly", "report", "fresh"]),  # unknown: no filter
])
def test_the_dag_list_filters(form, expected):
    assert [dag["dag_id"] for dag in dag_list.filtered(LISTED, dag_list.dag_filter(**form))] == expected


def test_a_filter_becomes_the_query_string_of_what_it_filters():
    assert dag_list.dag_filter().query() == ""
    assert dag_list.dag_filter(search="a b", paused="paused").query() == "search=a+b&paused=paused"
    assert dag_list.all_tags(LISTED) == ["finance", "ops"]


@pytest.mark.parametrize(("row", "latest", "now", "expected"), [
    ({"schedule": None}, None, JAN_1, None),
    ({"schedule": "@daily", "start_date": JAN_1 + 10 * DAY}, None, JAN_1, JAN_1 + 10 * DAY),  # not before its start
    ({"schedule": "@daily", "start_date": JAN_1, "catchup": True}, JAN_1 + DAY, JAN_1 + 30 * DAY, JAN_1 + 2 * DAY),
    ({"schedule": "@daily", "start_date": JAN_1, "catchup": False}, JAN_1 + DAY, JAN_1 + 30.5 * DAY,
     JAN_1 + 30 * DAY),  # no catch-up: the latest fire time, now
    ({"schedule": "@daily", "start_date": JAN_1}, JAN_1 + DAY, JAN_1 + DAY + 5, JAN_1 + 2 * DAY),
    ({"schedule": "@once", "start_date": JAN_1}, None, JAN_1 + 5, JAN_1),
    ({"schedule": "@once", "start_date": JAN_1}, JAN_1, JAN_1 + 5, None),
    ({"schedule": "not a cron", "start_date": JAN_1}, None, JAN_1, None),
    ({"schedule": "@daily", "start_date": None, "parsed_at": JAN_1 + 3600}, None, JAN_1 + 7200, JAN_1 + DAY),
    ({"schedule": "@daily", "start_date": JAN_1, "is_active": False}, None, JAN_1, None),
])
def test_the_next_run_is_the_one_the_scheduler_creates_next(row, latest, now, expected):
    assert dag_list.next_run({"is_active": True, **row}, latest, now) == expected


@pytest.mark.parametrize(("seconds", "text"), [(None, "—"), (0.25, "250 ms"), (12.34, "12.3 s"), (245, "4m 05s"),
                                               (7380, "2h 03m")])
def test_durations_read_for_people(seconds, text):
    assert views.duration(seconds) == text


def test_run_rows_have_a_duration_so_far_and_conf_as_json_text():
    runs = [{"run_id": "r1", "state": "success", "created_at": 100.0, "end_date": 160.0, "conf": {"b": 1, "a": "<x>"}},
            {"run_id": "r2", "state": "running", "created_at": 100.0, "end_date": None, "reopened_at": 150.0,
             "conf": None}]
    first, second = views.run_rows(runs, now=155.0)
    assert (first["duration"], first["conf_text"], first["look"]["symbol"], first["open"]) == (
        "1m 00s", '{"a": "<x>", "b": 1}', "✓", False)
    assert (second["duration"], second["conf_text"], second["open"]) == ("5.0 s", "{}", True)  # since reopened


def test_dag_files_merge_parse_status_and_import_errors_by_path():
    statuses = [{"file_path": "/d/b.py", "state": "failed", "dag_ids": [], "error": "boom", "at": 1.0},
                {"file_path": "/d/a.py", "state": "ok", "dag_ids": ["a"], "error": None, "at": 1.0}]
    errors = [{"file_path": "/d/b.py", "error": "boom", "traceback": "tb", "at": 1.0},
              {"file_path": "/d/c.py", "error": "gone?", "traceback": "", "at": 2.0}]
    files = views.dag_files(statuses, errors)
    assert [(row["file_path"], row["look"]["symbol"]) for row in files] == [
        ("/d/a.py", "✓"), ("/d/b.py", "✗"), ("/d/c.py", "✗")]
    assert files[0]["import_error"] is None and files[1]["import_error"]["traceback"] == "tb"


def test_liveness_has_a_symbol_for_each_state():
    looks = {state: views.liveness_look(state) for state in ("alive", "dead", "stopped", None)}
    assert [look["symbol"] for look in looks.values()] == ["♥", "☠", "■", "·"]
    assert len({look["css"] for look in looks.values()}) == 4


def test_graph_nodes_carry_the_latest_runs_state_and_a_short_label():
    tasks = [{"task_id": "a" * 40, "upstream": []}, {"task_id": "b", "upstream": ["a" * 40]}]
    result = group_graph.grouped_layout(tasks, [])
    nodes = graph_view.graph_view(result, tasks, [], {"b": {"state": "failed", "try_number": 2}}, ())["nodes"]
    assert [(node["symbol"], node["try_number"], len(node["label"])) for node in nodes] == [
        ("·", None, 22), ("✗", 2, 1)]


def test_grid_cells_are_links_with_colour_symbol_and_try_and_escaped_ids():
    runs = [{"run_id": "r&1", "state": "running"}]
    instances = [{"run_id": "r&1", "task_id": 'a"<b>', "state": "up_for_retry", "try_number": 2}]
    built = views.grid([{"task_id": 'a"<b>'}, {"task_id": "c d"}], runs, instances, "my dag")
    first, second = (str(grid_html.row_cells(row, built["columns"])) for row in built["rows"])
    assert first == ('<td><a class="cell retry" data-task="a&quot;&lt;b&gt;" data-state="up_for_retry" '
                     'href="/dags/my%20dag/runs/r%261/tasks/a%22%3Cb%3E" '
                     'aria-label="a&quot;&lt;b&gt; in r&amp;1: up_for_retry, try 2">↻<sub>2</sub></a></td>')
    assert 'class="cell none"' in second and 'href="/dags/my%20dag/runs/r%261/tasks/c%20d"' in second
    assert 'aria-label="c d in r&amp;1: no state">·</a>' in second
