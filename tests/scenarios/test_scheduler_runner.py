"""`tock run-task` as a process against the real broker: events straight to Kafka, idempotent launch."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from infra.log import replay
from schemas import EVENTS, HEARTBEATS, TaskFailed, TaskHeartbeat, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import create_topics, environment
from tests.scenarios.snooping import Secrets, assert_nothing_found, snooping_dag

pytestmark = pytest.mark.scenario

DAG_FILE = '''
import os, time
from tock import DAG, task

with DAG("runner_cases") as dag:
    @task
    def slow_ok():
        time.sleep(0.6)
        print("finished")

    @task
    def crashes():
        os._exit(9)

    @task
    def rambles():
        raise ValueError("é" * 20000)

    slow_ok(); crashes(); rambles()
'''


def run_task(settings, dag_file, task_id):
    return subprocess.run([sys.executable, "-m", "tock_cli", "run-task", "runner_cases", "r1", task_id, "1",
                           "--dag-file", str(dag_file), "--executor", "local", "--queue", "default"],
                          env=environment(settings), capture_output=True, text=True, timeout=60)


def test_run_task_reports_start_heartbeats_and_outcome_and_refuses_a_second_launch(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.1)
    create_topics(settings)
    dag_file = tmp_path / "cases.py"
    dag_file.write_text(DAG_FILE)
    assert run_task(settings, dag_file, "slow_ok").returncode == 0
    assert run_task(settings, dag_file, "crashes").returncode == 1
    again = run_task(settings, dag_file, "slow_ok")
    assert again.returncode == 3 and "launched before" in again.stderr
    events = [record.event for record in replay(settings, EVENTS)]
    started = [event for event in events if isinstance(event, TaskStarted)]
    # the second launch claimed slow_ok too (its TaskStarted), read that it came second, ran nothing
    assert sorted(event.task_id for event in started) == ["crashes", "slow_ok", "slow_ok"]
    assert all(event.executor == "local" and event.log_path.endswith("/1.log") for event in started)
    [succeeded] = [event for event in events if isinstance(event, TaskSucceeded)]
    [failed] = [event for event in events if isinstance(event, TaskFailed)]
    assert (succeeded.task_id, failed.task_id, failed.error) == ("slow_ok", "crashes", "user code exited with code 9")
    beats = [record.event for record in replay(settings, HEARTBEATS)]
    assert all(isinstance(event, TaskHeartbeat) for event in beats)
    # slow_ok beat while it ran; crashes may too, while the broker had not acknowledged its outcome yet
    assert [event for event in beats if event.task_id == "slow_ok"]
    assert {event.task_id for event in beats} <= {"slow_ok", "crashes"}
    log = settings.home / "tries" / "runner_cases" / "r1" / "slow_ok" / "1.log"
    assert log.read_text() == "finished\n"


def test_a_failure_reported_at_length_ends_the_try_with_its_reason_cut_in_task_failed(make_settings, tmp_path):
    from services.runner.child import ERROR_LIMIT, TRACEBACK_LIMIT

    settings = make_settings(task_heartbeat_seconds=0.1)
    create_topics(settings)
    dag_file = tmp_path / "cases.py"
    dag_file.write_text(DAG_FILE)
    assert run_task(settings, dag_file, "rambles").returncode == 1  # it ends (before the fix: a hang)
    [failed] = [record.event for record in replay(settings, EVENTS) if isinstance(record.event, TaskFailed)]
    assert failed.error.startswith("ValueError: " + "é" * 1000) and len(failed.error) <= ERROR_LIMIT
    assert "the try's log has it whole" in failed.error
    assert "in rambles" in failed.traceback and len(failed.traceback) <= TRACEBACK_LIMIT


def test_a_batch_launched_together_shares_a_runner_and_each_try_reports_for_itself(make_settings, tmp_path):
    from infra.executors import LocalExecutor
    from infra.log import KafkaEventLog
    from services.runner import TryRequest, local_launcher_command

    settings = make_settings(task_heartbeat_seconds=0.1, warm_runners=1)
    create_topics(settings)
    dag_file = tmp_path / "cases.py"
    dag_file.write_text(DAG_FILE)
    requests = [TryRequest("runner_cases", "r1", task_id, 1, str(dag_file)) for task_id in ("slow_ok", "crashes")]
    launched_before = TryRequest("runner_cases", "r0", "slow_ok", 1, str(dag_file))
    with KafkaEventLog(settings, client_id="test-earlier-runner") as event_log:  # another runner claimed it first
        event_log.append(TaskStarted(dag_id="runner_cases", run_id="r0", task_id="slow_ok", try_number=1,
                                     runner_id="elsewhere:1:earlier", hostname="elsewhere", pid=1, at=time.time()))
    executor = LocalExecutor(settings, local_launcher_command())
    try:
        handles = executor.launch_many([(request, "default") for request in [*requests, launched_before]])
    finally:
        executor.close()
    assert len(set(handles)) == 1  # one runner for the batch
    events = wait_for_outcomes(settings, 2)
    outcomes = {event.task_id: type(event).__name__ for event in events
                if isinstance(event, TaskSucceeded | TaskFailed)}
    assert outcomes == {"slow_ok": "TaskSucceeded", "crashes": "TaskFailed"}
    assert all(event.run_id == "r1" for event in events if not isinstance(event, TaskStarted))  # r0 ran nothing
    ours = [event for event in events if isinstance(event, TaskStarted) and event.hostname != "elsewhere"]
    assert sorted((event.run_id, event.task_id) for event in ours) == [("r0", "slow_ok"), ("r1", "crashes"),
                                                                      ("r1", "slow_ok")]
    assert len({event.runner_id for event in ours}) == 3


def test_local_tries_find_none_of_the_schedulers_secrets(make_settings, tmp_path, monkeypatch):
    """The scheduler holds an admin token and a database URL in its settings and environment, and a
    cloud key in its environment; its local tries see none of them, anywhere they could look."""
    from infra.executors import LocalExecutor
    from services.runner import TryRequest, local_launcher_command

    secrets = Secrets()
    settings = make_settings(task_heartbeat_seconds=0.1, warm_runners=1, **secrets.settings)
    for name, value in {**environment(settings), **secrets.environment}.items():
        monkeypatch.setenv(name, value)  # the scheduler's environment, which starts the launcher
    create_topics(settings)
    out = tmp_path / "out"
    out.mkdir()
    dag_file = snooping_dag(tmp_path, out, "local")
    requests = [TryRequest("snoops", "r1", task_id, 1, str(dag_file)) for task_id in ("bash_snoops", "python_snoops")]
    executor = LocalExecutor(settings, local_launcher_command())
    try:
        executor.launch_many([(request, "default") for request in requests])
    finally:
        executor.close()
    events = wait_for_outcomes(settings, 2)
    assert sorted(event.task_id for event in events if isinstance(event, TaskSucceeded)) == [
        "bash_snoops", "python_snoops"], [event for event in events if isinstance(event, TaskFailed)]
    assert_nothing_found(out, secrets)


def wait_for_outcomes(settings, count: int, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while True:
        events = [record.event for record in replay(settings, EVENTS)]
        if sum(isinstance(event, TaskSucceeded | TaskFailed) for event in events) >= count:
            return events
        assert time.monotonic() < deadline, f"no {count} outcomes after {timeout} s: {events}"
        time.sleep(0.2)
