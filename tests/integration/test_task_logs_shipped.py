"""Task logs through tock.logs: tries run by the real runner (`tock run-task`) ship their lines, and
the CLI and the API read them back with the local log file deleted (so from the topic); past the
budget a truncation marker shows; following sees lines while the try runs and ends when it ends."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from fastapi.testclient import TestClient

from schemas import DagRunCreated, TaskQueued
from services.api.app import create_app
from services.api.task_logs import log_file
from tests.integration.api_support import ADMIN, ADMIN_TOKEN
from tests.integration.test_cli_operator import project, tock
from tests.scenarios.scheduler_support import create_topics, environment
from tests.unit.projection_logs import dag_parsed

pytestmark = pytest.mark.integration
RUN = "manual__1"

DAG_FILE = '''
import os, sys, time
from tock import DAG, task

with DAG("shiplog") as dag:
    @task
    def talk():
        print("hello from the try")
        print("second line", file=sys.stderr)
        print("no newline at the end", end="")

    @task
    def chatty():
        for index in range(100):
            print(f"line {index:03d}")

    @task
    def slow():
        print("line 1", flush=True)
        while not os.path.exists(os.environ["TOCKRUN_DAG_ID"] + ".gate"):
            time.sleep(0.05)
        print("line 2")

    @task
    def flood():
        for index in range(100_000):  # ~7 MB in a fraction of a second: several reads left at its end
            print(f"line {index:06d} of the flood, some text to make it a typical log line")

    talk(); chatty(); slow(); flood()
'''


@pytest.fixture
def make_shipping(make_settings, tmp_path):
    def make(**overrides):
        settings = make_settings(db_url=f"sqlite:///{tmp_path / 'tock.db'}", **overrides)
        create_topics(settings)
        dag_file = tmp_path / "shiplog.py"
        dag_file.write_text(DAG_FILE)
        at = time.time()
        project(settings, [dag_parsed("shiplog", at, tasks=("talk", "chatty", "slow", "flood"), path=str(dag_file)),
                           DagRunCreated(dag_id="shiplog", run_id=RUN, logical_date=at, run_type="manual",
                                         dag_fingerprint="f", scheduler_id="s1", at=at),
                           *[TaskQueued(dag_id="shiplog", run_id=RUN, task_id=task_id, try_number=1,
                                        executor="local", queue="default", scheduler_id="s1", at=at)
                             for task_id in ("talk", "chatty", "slow", "flood")]])
        return settings, dag_file
    return make


def run_task(settings, dag_file, task_id: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tock_cli", "run-task", "shiplog", RUN, task_id, "1",
                             "--dag-file", str(dag_file)], env=environment(settings), cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def ran(settings, dag_file, task_id: str, cwd) -> None:
    """Run the try to its end with the real runner, project its events, delete its local log file."""
    runner = run_task(settings, dag_file, task_id, cwd)
    output, _ = runner.communicate(timeout=120)
    assert runner.returncode == 0, output
    project(settings)
    log_file(settings.home, "shiplog", RUN, task_id, 1).unlink()


def api_log(settings, task_id: str, **params) -> str:
    with TestClient(create_app(settings.model_copy(update={'api_token': ADMIN_TOKEN})), headers=ADMIN) as client:
        response = client.get(f"/api/v1/dags/shiplog/runs/{RUN}/tasks/{task_id}/logs", params=params)
    assert response.status_code == 200, response.text
    return response.text


def test_a_try_s_lines_are_read_from_the_topic_by_the_cli_and_the_api(make_shipping, tmp_path):
    settings, dag_file = make_shipping()
    ran(settings, dag_file, "talk", tmp_path)
    expected = "hello from the try\nsecond line\nno newline at the end"
    result = tock(settings, "tasks", "logs", "shiplog", RUN, "talk")
    assert (result.exit_code, result.stdout) == (0, expected), result.output
    assert tock(settings, "tasks", "logs", "shiplog", RUN, "talk", "--follow").stdout == expected
    assert api_log(settings, "talk") == expected
    assert api_log(settings, "talk", follow="true") == expected


def test_a_try_that_wrote_megabytes_in_its_last_moments_has_every_line_shipped(make_shipping, tmp_path):
    settings, dag_file = make_shipping()
    ran(settings, dag_file, "flood", tmp_path)
    lines = tock(settings, "tasks", "logs", "shiplog", RUN, "flood").stdout.splitlines()
    assert len(lines) == 100_000 and lines[-1].startswith("line 099999 ")


def test_past_the_budget_a_truncation_marker_names_the_whole_file(make_shipping, tmp_path):
    settings, dag_file = make_shipping(task_log_ship_limit_bytes=300)
    ran(settings, dag_file, "chatty", tmp_path)
    printed = tock(settings, "tasks", "logs", "shiplog", RUN, "chatty").stdout
    lines = printed.splitlines()
    assert lines[:-1] == [f"line {index:03d}" for index in range(len(lines) - 1)]
    assert len(lines) - 1 == 300 // len("line 000\n")
    path = log_file(settings.home, "shiplog", RUN, "chatty", 1)
    assert lines[-1].startswith("[tock] log truncated: 297 bytes shipped") and f"{settings.host}:{path}" in lines[-1]
    assert api_log(settings, "chatty") == printed


def test_following_sees_lines_while_the_try_runs_and_ends_when_it_ends(make_shipping, tmp_path):
    settings, dag_file = make_shipping()
    runner = run_task(settings, dag_file, "slow", tmp_path)
    follower = subprocess.Popen([sys.executable, "-m", "tock_cli", "tasks", "logs", "shiplog", RUN, "slow",
                                 "--try", "1", "--follow"], env=environment(settings), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        assert follower.stdout.readline() == "line 1\n"  # printed while the try waits for its gate
        assert runner.poll() is None and follower.poll() is None
        (tmp_path / "shiplog.gate").touch()
        assert follower.stdout.read() == "line 2\n"
        assert follower.wait(60) == 0
        assert runner.wait(60) == 0
    finally:
        for process in (runner, follower):
            process.kill()
            process.wait()


def test_a_try_with_nothing_shipped_nor_a_file_is_a_clear_error(make_shipping):
    settings, _dag_file = make_shipping()
    result = tock(settings, "tasks", "logs", "shiplog", RUN, "talk")
    assert result.exit_code == 1 and "no log of try 1 of talk in tock.logs, nor on this host" in result.stderr
    with TestClient(create_app(settings.model_copy(update={'api_token': ADMIN_TOKEN})), headers=ADMIN) as client:
        assert client.get(f"/api/v1/dags/shiplog/runs/{RUN}/tasks/talk/logs").status_code == 404
