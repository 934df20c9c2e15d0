"""Dead means stopped (issue 20, defect 7): a try declared dead is stopped where it runs.

A runner that could not be heard (frozen here with SIGSTOP: a partitioned or clock-skewed host)
has its try declared dead and retried. When it comes back it reads the TaskDeclaredDead of the
try it won and stops its user code, as it would for a TaskKillRequested; and an executor that can
stop a try itself (a pod's delete) is asked to, so the try stops even while its runner stays
frozen. Either way try N never runs on beside try N+1.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from schemas import TaskDeclaredDead, TaskKilled, TaskStarted, TaskSucceeded
from tests.scenarios.celery_support import lines_of
from tests.scenarios.kube_support import Agents, kube_settings, pods
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger, wait_until

pytestmark = pytest.mark.scenario

TICKER = '''
from tock import DAG, BashTask

with DAG("ticker", retries=1, retry_delay=0) as dag:
    BashTask("tick", 'if [ "$TOCKRUN_TRY_NUMBER" = 1 ]; then for i in $(seq 1 240); do '
             'echo "$TOCKRUN_TRY_NUMBER $i" >> {ticks}; sleep 0.25; done; fi; echo done'{executor})
'''


def _user_code(runner: int) -> list[psutil.Process]:
    """The processes under the runner that run the try's bash loop."""
    try:
        return [process for process in psutil.Process(runner).children(recursive=True)
                if process.name() in ("bash", "sh", "sleep")]
    except psutil.NoSuchProcess:
        return []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    return alive


def _first_try_ticks(ticks) -> int:
    return sum(line.startswith("1 ") for line in lines_of(ticks))


def _frozen_until_retried(tail: LogTail, run_id: str, ticks) -> tuple[int, list[psutil.Process]]:
    """Freeze try 1's runner once its user code ticks; wait for its death and its retry's end."""
    [first] = tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id, try_number=1), 120,
                            "try 1 to start")
    wait_until(lambda: _first_try_ticks(ticks) >= 2, 30, "try 1's user code to tick")
    user_code = wait_until(lambda: _user_code(first.pid), 10, "try 1's user code under its runner")
    os.kill(first.pid, signal.SIGSTOP)
    tail.wait_for(lambda _events: tail.of_type(TaskDeclaredDead, run_id=run_id, try_number=1), 60,
                  "try 1 to be declared dead")
    tail.wait_for(lambda _events: tail.of_type(TaskSucceeded, run_id=run_id, try_number=2), 90,
                  "try 2 to succeed")
    return first.pid, user_code


def test_a_frozen_local_runner_thawed_after_its_try_was_declared_dead_stops_its_user_code(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.3, task_heartbeat_timeout=3, scheduler_session_timeout=6)
    create_topics(settings)
    ticks = tmp_path / "ticks.txt"
    path = tmp_path / "ticker.py"
    path.write_text(TICKER.format(ticks=ticks, executor=""))
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    runner = None
    try:
        publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "ticker")
        runner, user_code = _frozen_until_retried(tail, run_id, ticks)
        assert _alive(user_code), "the frozen runner's user code runs on (only the runner was frozen)"
        os.kill(runner, signal.SIGCONT)  # the host comes back
        thawed = time.monotonic()
        wait_until(lambda: not _alive(user_code), 10, "try 1's user code to be stopped by its thawed runner")
        assert time.monotonic() - thawed < 10
        [killed] = tail.wait_for(lambda _events: tail.of_type(TaskKilled, run_id=run_id, try_number=1), 30,
                                 "try 1's runner to report the stop")
        assert "declared dead" in killed.reason
        ticked = _first_try_ticks(ticks)
        time.sleep(1.0)  # part of the scenario: try 1 must not tick any more
        assert _first_try_ticks(ticks) == ticked
    finally:
        if runner is not None:
            os.kill(runner, signal.SIGCONT) if psutil.pid_exists(runner) else None
        processes.close()
        tail.close()


def test_the_pod_of_a_try_declared_dead_is_deleted_while_its_runner_is_still_frozen(
        make_settings, kube_namespace, redis_url, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.3,
                             task_heartbeat_timeout=4, scheduler_session_timeout=6)
    create_topics(settings)
    ticks = tmp_path / "ticks.txt"
    path = tmp_path / "ticker.py"
    path.write_text(TICKER.format(ticks=ticks, executor=', executor="kubernetes"'))
    agents = Agents(settings, tmp_path / "nodes")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    runner = None
    try:
        agents.start("node-a")
        publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "ticker")
        first_pod = {pod.metadata.name for pod in wait_until(lambda: pods(settings), 60, "try 1's pod")}
        runner, user_code = _frozen_until_retried(tail, run_id, ticks)
        # The runner never thaws: only its executor can stop the try (the scheduler deletes the pod,
        # its node kills the pod's processes, the runner's group watcher the user code).
        wait_until(lambda: not _alive(user_code), 20, "try 1's user code to be stopped with its pod")
        wait_until(lambda: not first_pod & {pod.metadata.name for pod in pods(settings)}, 20,
                   "try 1's pod to be deleted")
        ticked = _first_try_ticks(ticks)
        time.sleep(1.0)  # part of the scenario: try 1 must not tick any more
        assert _first_try_ticks(ticks) == ticked
    finally:
        if runner is not None and psutil.pid_exists(runner):
            os.kill(runner, signal.SIGCONT)
        processes.close()
        agents.close()
        tail.close()
