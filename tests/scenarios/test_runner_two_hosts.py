"""Scenario 4 of issue 8: the same try launched on two hosts at the same moment runs its user code once.

Two real `tock run-task` processes, each a simulated host of its own (TOCK_HOSTNAME, TOCK_HOME:
no file is shared between them), start the same try together against the real broker. The
claim is decided through the log: the first TaskStarted in log order wins.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from infra.log import KafkaEventLog, replay
from schemas import EVENTS, TaskQueued, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import REPO, create_topics, environment

pytestmark = pytest.mark.scenario

DAG_FILE = '''
from tock import DAG, BashTask

with DAG("two_hosts") as dag:
    BashTask("append", 'echo "ran on $TOCKRUN_RUN_ID" >> {ledger}; sleep 0.5')
'''
HOSTS = ("host-a", "host-b")
ROUNDS = 3


def queue_try(settings, run_id: str) -> float:
    """The scheduler's decision for the try (its TaskQueued), as the runners' claims will read it."""
    queued_at = time.time()
    with KafkaEventLog(settings, client_id="test-scheduler") as event_log:
        event_log.append(TaskQueued(dag_id="two_hosts", run_id=run_id, task_id="append", try_number=1,
                                    executor="local", queue="default", scheduler_id="test", at=queued_at))
    return queued_at


def launch_on_both_hosts(settings, tmp_path, dag_file, run_id: str, queued_at: float) -> dict[str, tuple]:
    """Start the try on both hosts at once; each host's (exit code, stderr)."""
    processes = {}
    for host in HOSTS:
        env = {**environment(settings), "TOCK_HOSTNAME": host, "TOCK_HOME": str(tmp_path / host)}
        processes[host] = subprocess.Popen(
            [sys.executable, "-m", "tock_cli", "run-task", "two_hosts", run_id, "append", "1", "--dag-file",
             str(dag_file), "--queued-at", repr(queued_at)], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    return {host: (process.wait(60), process.stderr.read()) for host, process in processes.items()}


def test_the_same_try_launched_on_two_hosts_at_the_same_moment_runs_its_user_code_once(make_settings, tmp_path):
    settings = make_settings()
    create_topics(settings)
    ledger = tmp_path / "ledger.txt"
    dag_file = tmp_path / "two_hosts.py"
    dag_file.write_text(DAG_FILE.format(ledger=ledger))
    ended = {}
    for index in range(ROUNDS):
        run_id = f"r{index}"
        ended[run_id] = launch_on_both_hosts(settings, tmp_path, dag_file, run_id, queue_try(settings, run_id))
    events = [record.event for record in replay(settings, EVENTS)]
    assert sorted(ledger.read_text().splitlines()) == [f"ran on r{index}" for index in range(ROUNDS)]
    for run_id, by_host in ended.items():
        assert sorted(code for code, _stderr in by_host.values()) == [0, 3], by_host
        first, second = [event for event in events if isinstance(event, TaskStarted) and event.run_id == run_id]
        [succeeded] = [event for event in events if isinstance(event, TaskSucceeded) and event.run_id == run_id]
        assert succeeded.runner_id == first.runner_id and by_host[first.hostname][0] == 0
        assert f"runner {first.runner_id} started it first" in by_host[second.hostname][1]
