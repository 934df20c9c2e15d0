"""The runner's supervision of user code: every way a task can end becomes a clear outcome.

Real forked children, no broker: the heartbeat is a plain callable here.
"""

from __future__ import annotations

import pytest

from services.runner.paths import TryPaths, TryRequest
from services.runner.supervise import supervise

DAG_FILE = '''
import ctypes, os, sys, time
from tock import DAG, BashTask, task

with DAG("cases") as dag:
    @task
    def ok():
        print("hello from the task")

    @task
    def raises():
        raise ValueError("bad input")

    @task
    def exits():
        os._exit(7)

    @task
    def segfaults():
        ctypes.string_at(0)

    @task
    def sleeps():
        time.sleep(30)

    @task
    def beats():
        time.sleep(0.5)

    ok(); raises(); exits(); segfaults(); sleeps(); beats()
    BashTask("bash_fails", "echo to-stderr >&2; exit 3")
'''


@pytest.fixture
def dag_file(tmp_path):
    path = tmp_path / "cases.py"
    path.write_text(DAG_FILE)
    return path


def run(tmp_path, dag_file, task_id, timeout=None, every=10.0):
    request = TryRequest("cases", "r1", task_id, 1, str(dag_file), timeout)
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    beats = []
    outcome = supervise(request, str(paths.log), every, lambda: beats.append(1))
    return outcome, paths.log.read_text(), len(beats)


@pytest.mark.parametrize(("task_id", "error"), [
    ("raises", "ValueError: bad input"),
    ("exits", "user code exited with code 7"),
    ("segfaults", "user code killed by signal SIGSEGV (11)"),
    ("bash_fails", "user code exited with code 3"),
])
def test_failures_are_reported_with_their_cause(tmp_path, dag_file, task_id, error):
    outcome, _log, _beats = run(tmp_path, dag_file, task_id)
    assert (outcome.succeeded, outcome.error) == (False, error)


def test_exception_comes_with_its_traceback_and_lands_in_the_log(tmp_path, dag_file):
    outcome, log, _beats = run(tmp_path, dag_file, "raises")
    assert "in raises" in outcome.traceback and "ValueError: bad input" in log


def test_success_and_output_in_the_try_log(tmp_path, dag_file):
    outcome, log, _beats = run(tmp_path, dag_file, "ok")
    assert outcome.succeeded and log == "hello from the task\n"


def test_bash_output_goes_to_the_log(tmp_path, dag_file):
    _outcome, log, _beats = run(tmp_path, dag_file, "bash_fails")
    assert log == "to-stderr\n"


def test_execution_timeout_kills_the_task(tmp_path, dag_file):
    outcome, _log, _beats = run(tmp_path, dag_file, "sleeps", timeout=0.3)
    assert (outcome.succeeded, outcome.error) == (False, "execution timeout: still running after 0.3 s, killed")


def test_heartbeats_while_the_task_runs(tmp_path, dag_file):
    outcome, _log, beats = run(tmp_path, dag_file, "beats", every=0.1)
    assert outcome.succeeded and beats >= 3


def test_unknown_task_fails_clearly(tmp_path, dag_file):
    outcome, _log, _beats = run(tmp_path, dag_file, "nope")
    assert not outcome.succeeded and "has no task 'nope'" in outcome.error


def test_a_try_is_claimed_once(tmp_path):
    paths = TryPaths(tmp_path, TryRequest("d", "scheduled__2026-01-01T00:00:00+00:00", "t", 2, "/x.py"))
    assert paths.claim() is True
    assert paths.claim() is False
    assert paths.log.name == "2.log" and ":" not in str(paths.folder)


def test_sigterm_to_the_runner_stops_the_user_code_and_reports_it(tmp_path, dag_file):
    import os
    import signal
    import threading

    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    outcome, _log, _beats = run(tmp_path, dag_file, "sleeps")
    assert (outcome.succeeded, outcome.error) == (False, "user code killed by signal SIGKILL (9)")


def test_tries_supervised_together_each_end_their_own_way(tmp_path, dag_file):
    from services.runner.supervise import supervise_all

    cases = {"ok": None, "exits": None, "sleeps": 0.5, "beats": None}
    requests = [TryRequest("cases", "r1", task_id, 1, str(dag_file), timeout) for task_id, timeout in cases.items()]
    tries = []
    for request in requests:
        paths = TryPaths(tmp_path / "home", request)
        paths.folder.mkdir(parents=True)
        tries.append((request, str(paths.log)))
    happened = []
    supervise_all(tries, 0.1, lambda request: happened.append(("beat", request.task_id)),
                  lambda request, outcome: happened.append(("end", request.task_id, outcome)))
    outcomes = {entry[1]: (entry[2].succeeded, entry[2].error) for entry in happened if entry[0] == "end"}
    assert outcomes == {"ok": (True, ""), "exits": (False, "user code exited with code 7"), "beats": (True, ""),
                        "sleeps": (False, "execution timeout: still running after 0.5 s, killed")}
    assert happened.count(("beat", "beats")) >= 3
    for index, entry in enumerate(happened):
        if entry[0] == "end":
            assert ("beat", entry[1]) not in happened[index:]  # no heartbeat for a try after its end
