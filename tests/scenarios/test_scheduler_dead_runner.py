"""Scenario 6 of issue 8: a runner holding a batch of tries is killed with kill -9.

All their user code (and what it started) dies with the runner within a second, through
the runner's group watcher; nothing else kills it. Each try is declared dead after the heartbeat
timeout (with the last heartbeat seen), retried once, and the run succeeds. The dead tries'
late events change nothing.
"""

from __future__ import annotations

import time

import psutil
import pytest

from infra.log import replay
from schemas import (
    HEARTBEATS,
    TaskDeclaredDead,
    TaskHeartbeat,
    TaskLaunched,
    TaskQueued,
    TaskRetryScheduled,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)

pytestmark = pytest.mark.scenario

TASKS = ("work_0", "work_1", "work_2")
VICTIM = '''
from tock import DAG, BashTask

with DAG("victim", retries=1, retry_delay=0) as dag:
    for name in {tasks!r}:
        BashTask(name, 'if [ "$TOCKRUN_TRY_NUMBER" = 1 ]; then sleep 60; fi; echo "done $TOCKRUN_TRY_NUMBER"')
'''


def test_a_runner_killed_hard_takes_its_batch_of_user_code_with_it_and_each_try_is_retried(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.3, task_heartbeat_timeout=3, scheduler_session_timeout=6)
    create_topics(settings)
    path = tmp_path / "victim.py"
    path.write_text(VICTIM.format(tasks=TASKS))
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "victim")
        started = tail.wait_for(lambda _events: len(found := tail.of_type(TaskStarted, run_id=run_id)) == 3 and found,
                                60, "the three tries to start")
        [runner] = {event.pid for event in started}  # one runner holds the batch
        tail.wait_for(lambda _events: len(tail.of_type(TaskLaunched, run_id=run_id)) == 3, 10, "the launches")
        user_code = wait_until(lambda: _sleeping_descendants(runner, 3), 30, "each try's bash to start its sleep")
        wait_until(lambda: _heartbeats_of(settings, run_id) >= set(TASKS), 30, "a heartbeat of each try")
        kill_hard(runner)
        killed_at = time.monotonic()
        wait_until(lambda: not [process for process in user_code if _alive(process)], 1.0,
                   "the user code to die with its runner")
        assert time.monotonic() - killed_at < 1.0
        finished = tail.run_finished(run_id, 60)
    finally:
        processes.close()
        tail.close()
    assert finished.state == "success"
    dead = tail.of_type(TaskDeclaredDead, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.scheduler_id) for event in dead) == [
        (task, 1, "only") for task in TASKS]
    assert all(event.last_heartbeat_at is not None and event.at - event.last_heartbeat_at >= 3 for event in dead)
    retries = tail.of_type(TaskRetryScheduled, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.next_try_number) for event in retries) == [
        (task, 1, 2) for task in TASKS]
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskQueued, run_id=run_id)) == [
        (task, number) for task in TASKS for number in (1, 2)]
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskSucceeded, run_id=run_id)) == [
        (task, 2) for task in TASKS]
    for task in TASKS:
        kinds = [type(event).__name__ for event in tail.events
                 if getattr(event, "run_id", None) == run_id and getattr(event, "task_id", None) == task]
        assert kinds.index("TaskDeclaredDead") < kinds.index("TaskRetryScheduled") < kinds.index("TaskSucceeded")



def _sleeping_descendants(pid: int, sleeps: int) -> list[psutil.Process] | None:
    """Every process under ``pid`` (its watcher, each try's bash and its sleep), once ``sleeps`` are ``sleep``."""
    try:
        processes = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    return processes if sum(_name(process) == "sleep" for process in processes) >= sleeps else None


def _heartbeats_of(settings, run_id: str) -> set[str]:
    return {record.event.task_id for record in replay(settings, HEARTBEATS)
            if isinstance(record.event, TaskHeartbeat) and record.event.run_id == run_id}


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
