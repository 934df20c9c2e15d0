"""CallableCaller against real subprocesses: a ``module:function`` callback written to tmp_path
(found through PYTHONPATH) is called with the payload, retried when it raises or hangs (killed at
the timeout), and whatever it does never reaches the caller's process."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest

from infra.callables import CallableCaller
from infra.callbacks import CallbackCaller, is_webhook

PAYLOAD = {"dag_id": "etl", "run_id": "manual__1", "trigger": "deadline_missed", "deadline": 1.5, "at": 2.0}

ALERTS = '''
import json, os, pathlib, sys, time

OUT = pathlib.Path({out!r})

def notify(payload):
    with OUT.open("a") as out:
        out.write(json.dumps(payload) + "\\n")

def flaky(payload):
    notify(payload)
    if len(OUT.read_text().splitlines()) < 2:
        raise RuntimeError("receiver down")

def broken(payload):
    raise ValueError("boom")

def hangs(payload):
    notify(payload)
    time.sleep(60)

def exits(payload):
    os._exit(3)
'''


@pytest.fixture
def calls(tmp_path, monkeypatch):
    """The file each call of the alerts module appends its payload to (tmp_path is on PYTHONPATH)."""
    out = tmp_path / "calls.jsonl"
    (tmp_path / "alerts_mod.py").write_text(textwrap.dedent(ALERTS.format(out=str(out))))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    return out


def payloads(out) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def outcome_of(target: str, *, timeout: float = 10.0):
    caller = CallableCaller(timeout=timeout, attempts=2, backoff=0.05)
    try:
        return caller.call(target, PAYLOAD).result(60)
    finally:
        caller.close()


def test_the_callable_gets_the_payload_in_a_child_process(calls):
    outcome = outcome_of("alerts_mod:notify")
    assert (outcome.ok, outcome.attempts, outcome.detail) == (True, 1, "returned")
    assert payloads(calls) == [PAYLOAD]


def test_a_callable_that_raises_is_retried_then_succeeds(calls):
    outcome = outcome_of("alerts_mod:flaky")
    assert (outcome.ok, outcome.attempts) == (True, 2) and len(payloads(calls)) == 2


@pytest.mark.parametrize("target, detail", [
    ("alerts_mod:broken", "exit 1: ValueError: boom"),
    ("alerts_mod:exits", "exit 3: no error output"),
    ("alerts_mod:missing", "AttributeError"),
    ("no_such_module:notify", "ModuleNotFoundError: No module named 'no_such_module'"),
])
def test_failures_are_retried_and_named_without_touching_the_caller(calls, target, detail):
    outcome = outcome_of(target)
    assert (outcome.ok, outcome.attempts) == (False, 2) and detail in outcome.detail


def test_a_hanging_callable_is_killed_at_the_timeout(calls):
    started = time.monotonic()
    outcome = outcome_of("alerts_mod:hangs", timeout=1.0)
    assert (outcome.ok, outcome.attempts, outcome.detail) == (False, 2, "timed out after 1 s (killed)")
    assert time.monotonic() - started < 10 and len(payloads(calls)) == 2


def test_the_callback_port_routes_by_the_form_of_the_target(calls):
    assert is_webhook("https://hooks.example/x") and not is_webhook("alerts_mod:notify")
    caller = CallbackCaller(callable_timeout=10.0)
    try:
        assert caller.call("alerts_mod:notify", PAYLOAD).result(30).ok
        refused = caller.call("http://127.0.0.1:9/nobody", PAYLOAD).result(60)
    finally:
        caller.close()
    assert payloads(calls) == [PAYLOAD] and not refused.ok and "Connection" in refused.detail
