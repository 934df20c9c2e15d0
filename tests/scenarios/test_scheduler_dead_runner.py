"""Scenario: a runner is killed with kill -9; its try is declared dead after the heartbeat
timeout (with the last heartbeat seen) and the retry succeeds. The dead try's late events
change nothing."""

from __future__ import annotations

import time

import pytest

from schemas import TaskDeclaredDead, TaskLaunched, TaskQueued, TaskRetryScheduled, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    descendants,
    kill_hard,
    publish_dags,
    trigger,
)

pytestmark = pytest.mark.scenario

VICTIM = '''
from tock import DAG, BashTask

with DAG("victim", retries=1, retry_delay=0) as dag:
    BashTask("work", 'if [ "$TOCKRUN_TRY_NUMBER" = 1 ]; then sleep 60; fi; echo "done $TOCKRUN_TRY_NUMBER"')
'''


def test_killed_runner_is_declared_dead_and_retried(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.3, task_heartbeat_timeout=3, scheduler_session_timeout=6)
    create_topics(settings)
    path = tmp_path / "victim.py"
    path.write_text(VICTIM)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "victim")
        [started] = tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id), 60, "the try to start")
        tail.wait_for(lambda events: any(isinstance(event, TaskLaunched) for event in events), 10, "launch")
        time.sleep(1.0)  # let a few heartbeats reach the log
        user_code = descendants(started.pid)
        kill_hard(started.pid)
        for pid in user_code:  # what a lost machine takes with it
            kill_hard(pid)
        finished = tail.run_finished(run_id, 60)
    finally:
        processes.close()
        tail.close()
    assert finished.state == "success"
    [dead] = tail.of_type(TaskDeclaredDead, run_id=run_id)
    assert dead.try_number == 1 and dead.scheduler_id == "only"
    assert dead.last_heartbeat_at is not None and dead.at - dead.last_heartbeat_at >= 3
    [retry] = tail.of_type(TaskRetryScheduled, run_id=run_id)
    assert (retry.try_number, retry.next_try_number) == (1, 2)
    assert [event.try_number for event in tail.of_type(TaskQueued, run_id=run_id)] == [1, 2]
    assert [event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)] == [2]
    kinds = [type(event).__name__ for event in tail.events if getattr(event, "run_id", None) == run_id]
    assert kinds.index("TaskDeclaredDead") < kinds.index("TaskRetryScheduled") < kinds.index("TaskSucceeded")
