"""Scenario: an example DAG run succeeds end to end (DAG processor, scheduler, runners and projector
as processes); each task's history, in the log and through `tock tasks history`, is in order."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from schemas import DagRunCreated, TaskLaunched, TaskQueued, TaskSucceeded
from tests.scenarios.scheduler_support import REPO, LogTail, Processes, create_topics, environment, wait_until_published

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
        processes.start("projector", name="projector")
        wait_until_published(settings, "example_etl")
        trigger = subprocess.run([sys.executable, "-m", "tock_cli", "dags", "trigger", "example_etl", "--wait",
                                  "--timeout", "90"], env=environment(settings), capture_output=True, text=True,
                                 timeout=120)
        assert trigger.returncode == 0, trigger.stderr + processes.log_of("scheduler-s1")
        run_id = trigger.stdout.splitlines()[0]
        assert trigger.stdout.splitlines()[-1] == f"run {run_id}: success"
        tail.run_finished(run_id, 10)
        histories = {task_id: _projected_history(settings, run_id, task_id) for task_id in ETL_TASKS}
    finally:
        processes.close()
        tail.close()
    assert len(tail.of_type(DagRunCreated, run_id=run_id)) == 1
    for task_id in ETL_TASKS:
        history = [type(event) for event in tail.events
                   if getattr(event, "run_id", None) == run_id and getattr(event, "task_id", None) == task_id]
        assert_lifecycle_in_order([kind.__name__ for kind in history], task_id)
    load = [event for event in tail.of_type(TaskQueued, run_id=run_id) if event.task_id == "load"][0]
    transforms = [event for event in tail.of_type(TaskSucceeded, run_id=run_id) if event.task_id.startswith("transf")]
    assert all(event.at <= load.at for event in transforms), "load was queued before its upstream succeeded"
    assert {event.task_id for event in tail.of_type(TaskLaunched, run_id=run_id)} == ETL_TASKS

    for task_id, history in histories.items():  # what `tock tasks history` shows, from the projection
        assert_lifecycle_in_order(history, task_id)


def assert_lifecycle_in_order(history: list[str], task_id: str) -> None:
    """Queued first, started before succeeded, each once. TaskLaunched is written by the scheduler
    after the launch, so a quick try may start (even finish) before it is in the log."""
    assert history[0] == "TaskQueued", (task_id, history)
    assert sorted(history) == sorted(["TaskQueued", "TaskLaunched", "TaskStarted", "TaskSucceeded"]), (task_id, history)
    assert history.index("TaskStarted") < history.index("TaskSucceeded"), (task_id, history)


def _projected_history(settings, run_id: str, task_id: str, timeout: float = 30.0) -> list[str]:
    """The event types `tock tasks history --json` lists for a task, once its outcome is projected."""
    deadline = time.monotonic() + timeout
    while True:
        shown = subprocess.run([sys.executable, "-m", "tock_cli", "tasks", "history", "example_etl", run_id, task_id,
                                "--json"], env=environment(settings), capture_output=True, text=True, timeout=60)
        types = [row["event_type"] for row in json.loads(shown.stdout)] if shown.returncode == 0 else []
        if len(types) >= 4 or time.monotonic() > deadline:
            return types
        time.sleep(0.3)
