"""The web UI's pure parts: wrong-password limits, signed sessions and CSRF tokens, the grid."""

from __future__ import annotations

from services.api.ui import login_limits, sessions, views

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
