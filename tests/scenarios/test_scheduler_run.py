"""Scenario: an example DAG run succeeds end to end (DAG processor, scheduler, runners as processes),
and each task's history in the log is in order."""

from __future__ import annotations

import subprocess
import sys

import pytest

from schemas import DagRunCreated, TaskLaunched, TaskQueued, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import REPO, LogTail, Processes, create_topics, environment

pytestmark = pytest.mark.scenario

EXAMPLES = REPO / "examples" / "dags"
ETL_TASKS = {"extract", "transform_eu", "transform_us", "transform_asia", "load", "report"}


@pytest.fixture
def settings(make_settings):
    settings = make_settings(dags_folder=EXAMPLES, task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def test_example_etl_run_succeeds_with_ordered_task_histories(settings, tmp_path):
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processes.start("dag-processor", name="dag-processor")
        processes.scheduler("s1")
        trigger = subprocess.run([sys.executable, "-m", "tock.cli", "dags", "trigger", "example_etl", "--wait",
                                  "--timeout", "90"], env=environment(settings), capture_output=True, text=True,
                                 timeout=120)
        assert trigger.returncode == 0, trigger.stderr + processes.log_of("scheduler-s1")
        run_id = trigger.stdout.splitlines()[0]
        assert trigger.stdout.splitlines()[-1] == f"run {run_id}: success"
        tail.run_finished(run_id, 10)
    finally:
        processes.close()
        tail.close()
    assert len(tail.of_type(DagRunCreated, run_id=run_id)) == 1
    for task_id in ETL_TASKS:
        history = [type(event) for event in tail.events
                   if getattr(event, "run_id", None) == run_id and getattr(event, "task_id", None) == task_id]
        assert history[0] is TaskQueued and history[-1] is TaskSucceeded, (task_id, history)
        assert sorted(kind.__name__ for kind in history) == sorted(
            ["TaskQueued", "TaskLaunched", "TaskStarted", "TaskSucceeded"]), (task_id, history)
        assert history.index(TaskStarted) < history.index(TaskSucceeded)
    load = [event for event in tail.of_type(TaskQueued, run_id=run_id) if event.task_id == "load"][0]
    transforms = [event for event in tail.of_type(TaskSucceeded, run_id=run_id) if event.task_id.startswith("transf")]
    assert all(event.at <= load.at for event in transforms), "load was queued before its upstream succeeded"
    assert {event.task_id for event in tail.of_type(TaskLaunched, run_id=run_id)} == ETL_TASKS
