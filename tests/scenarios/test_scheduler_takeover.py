"""Scenarios: a scheduler is killed with kill -9 while tries run; the next owner adopts them.

Runners outlive the scheduler (own session), so nothing is rerun; adoption asks the executor
named by TaskQueued, whatever a worker reported later.
"""

from __future__ import annotations

import time

import pytest

from schemas import TaskAdopted, TaskDeclaredDead, TaskQueued, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, kill_hard, publish_dags, trigger

pytestmark = pytest.mark.scenario

SLEEPERS = '''
from tock import DAG, BashTask

with DAG("sleepers", retries=1, retry_delay=0) as dag:
    for index in range({count}):
        BashTask(f"sleep_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; sleep {seconds}')
'''


@pytest.fixture
def settings(make_settings):
    settings = make_settings(task_heartbeat_seconds=0.5, task_heartbeat_timeout=15, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def sleepers(tmp_path, count: int, seconds: float):
    ran = tmp_path / "ran.txt"
    path = tmp_path / "dags" / "sleepers.py"
    path.parent.mkdir()
    path.write_text(SLEEPERS.format(count=count, ran=ran, seconds=seconds))
    return path, ran


def all_started(tail: LogTail, run_id: str, count: int):
    return tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= count, 60,
                         f"{count} tries to start")


def crash_and_replace(settings, tmp_path, count: int, seconds: float, before_kill=lambda _started: None):
    """Scheduler "first" starts ``count`` sleeping tries and is killed; "second" takes over.
    Returns (the log as read, run id, file of task executions, DagRunFinished)."""
    path, ran = sleepers(tmp_path, count, seconds)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        first = processes.scheduler("first")
        run_id = trigger(settings, "sleepers")
        all_started(tail, run_id, count)
        before_kill(tail.of_type(TaskStarted, run_id=run_id))
        kill_hard(first.pid)
        processes.scheduler("second")
        finished = tail.run_finished(run_id, 90)
    finally:
        processes.close()
        tail.close()
    return tail, run_id, ran, finished


def test_scheduler_killed_with_running_tries_new_one_adopts_them_all(settings, tmp_path):
    tail, run_id, ran, finished = crash_and_replace(settings, tmp_path, 5, 20)
    assert finished.state == "success"
    adopted = tail.of_type(TaskAdopted, run_id=run_id)
    assert sorted(event.task_id for event in adopted) == [f"sleep_{index}" for index in range(5)]
    assert {(event.by_scheduler, event.from_scheduler, event.try_number) for event in adopted} == {
        ("second", "first", 1)}
    assert {event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)} == {1}
    assert [event for event in tail.of_type(TaskQueued, run_id=run_id) if event.try_number > 1] == []
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert sorted(ran.read_text().splitlines()) == [f"sleep_{index} 1" for index in range(5)]


def test_worker_reported_executor_and_queue_do_not_reroute_adoption(settings, tmp_path):
    """A runner's events naming another executor/queue than its TaskQueued change nothing."""
    tail, run_id, ran, finished = crash_and_replace(settings, tmp_path, 1, 15,
                                                    lambda started: _report_as_worker(settings, started[0]))
    assert finished.state == "success"
    assert {(event.executor, event.queue) for event in tail.of_type(TaskStarted, run_id=run_id)} == {
        ("local", "default"), ("kubernetes", "gpu")}
    [queued] = tail.of_type(TaskQueued, run_id=run_id)
    assert (queued.executor, queued.queue) == ("local", "default")
    assert [(event.by_scheduler, event.try_number) for event in tail.of_type(TaskAdopted, run_id=run_id)] == [
        ("second", 1)]
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert ran.read_text().splitlines() == ["sleep_0 1"]


def _report_as_worker(settings, started: TaskStarted) -> None:
    """What a misconfigured worker might say about the try: another executor and queue."""
    from dataclasses import replace

    from infra.log import KafkaEventLog

    with KafkaEventLog(settings, client_id="test-worker") as event_log:
        event_log.append(replace(started, executor="kubernetes", queue="gpu", at=time.time()))
