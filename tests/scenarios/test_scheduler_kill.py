"""Scenarios of issue 9: the scheduler stops a running try through the log, and the runner obeys.

A real scheduler and real runners against the real broker. An operator's KillTask, ClearTask
or MarkTask of a try that runs makes the scheduler commit a TaskKillRequested; the try's
runner kills the user code's whole process group and reports TaskKilled; then what the
command asked for follows: the try fails for good (kill), a new try starts once the first copy
is gone (clear), tasks downstream follow the marked state (mark). The user code writes its pid
and start time to a file; the test watches its processes end through pidfds, and the user code
that may only start once they are gone (try 2, the downstream task) notes whether they are.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from schemas import (
    ClearTask,
    CommandRejected,
    KillTask,
    MarkTask,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    environment,
    publish_dags,
    trigger,
    wait_until,
)
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario

DAG_ID = "stoppable"
# Try 1 of "long" runs for 10 minutes (bash, and a sleep it waits for): "start 1 <pid> <time>",
# "child 1 <pid>". Later tries, and "after", end at once, having noted for each process of try 1
# its state as they started ("try1 <pid> <state>": gone, Z for a zombie, else still running).
TRY_1_STATES = '''for pid in $(awk '$2 == 1 {{print $3}}' {starts}); do
    echo "try1 $pid $(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null || echo gone)" >> {notes}; done'''
DAG_FILE = '''
from tock import DAG, BashTask

with DAG("stoppable", retries=1, retry_delay=0) as dag:
    long = BashTask("long", """echo "start $TOCKRUN_TRY_NUMBER $$ $(date +%s.%N)" >> {starts}
if [ "$TOCKRUN_TRY_NUMBER" = 1 ]; then sleep 600 & echo "child 1 $!" >> {starts}; wait
else {long_checks}; fi""")
    after = BashTask("after", """{after_checks}""")
    long >> after
'''


class ExitWatch:
    """Watches processes that are not ours through pidfds; when each ended (time.time())."""

    def __init__(self, pids: list[int]) -> None:
        self.ended: dict[int, float] = {}
        self._fds = {os.pidfd_open(pid): pid for pid in pids}
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def gone_at(self, timeout: float, what: str) -> float:
        """When the last of them ended; fails naming ``what`` after ``timeout`` seconds."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"timed out after {timeout:g} s waiting for {what} to end"
        return max(self.ended.values())

    def _watch(self) -> None:
        while self._fds:
            ready, _, _ = select.select(list(self._fds), [], [])
            now = time.time()
            for descriptor in ready:
                self.ended[self._fds.pop(descriptor)] = now
                os.close(descriptor)


class Stoppable:
    """The DAG above published, a real scheduler (and optionally the projector) running, the log tailed."""

    def __init__(self, settings, tmp_path: Path) -> None:
        self.settings, self.starts, self.after = settings, tmp_path / "starts", tmp_path / "after"
        path = tmp_path / "stoppable.py"
        path.write_text(DAG_FILE.format(starts=self.starts,
                                        long_checks=TRY_1_STATES.format(starts=self.starts, notes=self.starts),
                                        after_checks=TRY_1_STATES.format(starts=self.starts, notes=self.after)))
        publish_dags(settings, path)
        self.processes, self.tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
        self.processes.scheduler("s1")

    def first_try_running(self, run_id: str) -> tuple[ExitWatch, list[int]]:
        """Once try 1 of "long" runs its sleep: a watch on its bash and its sleep, and their pids."""
        self.tail.wait_for(lambda _events: self.tail.of_type(TaskStarted, run_id=run_id, task_id="long"), 90,
                           "try 1 of long to start")
        lines = wait_until(lambda: (found := self.lines()) and any(line[0] == "child" for line in found) and found,
                           30, "try 1's user code to start its sleep")
        pids = [int(line[2]) for line in lines if line[:2] in (["start", "1"], ["child", "1"])]
        return ExitWatch(pids), pids

    def lines(self, path: Path | None = None) -> list[list[str]]:
        path = path or self.starts
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def try_1_as_seen_from(self, path: Path) -> dict[int, str]:
        """The state of each process of try 1 when the user code that wrote ``path`` started."""
        return {int(line[1]): line[2] for line in self.lines(path) if line[0] == "try1"}

    def command(self, event) -> None:
        event_log = shared_event_log(self.settings)
        event_log.append(event)
        event_log.flush()

    def history(self, run_id: str, task_id: str) -> list[tuple[str, int | None]]:
        """(event type, try number) of the task instance's events, in log order."""
        return [(type(event).__name__, getattr(event, "try_number", None)) for event in self.tail.events
                if getattr(event, "run_id", None) == run_id and getattr(event, "task_id", None) == task_id]

    def close(self) -> None:
        """Stop the services; and try 1's user code, should a failed test have left it running."""
        for pid in {int(line[2]) for line in self.lines() if line[:2] in (["start", "1"], ["child", "1"])}:
            try:
                process = psutil.Process(pid)
                if process.name() in ("bash", "sleep"):
                    process.kill()
            except psutil.NoSuchProcess:
                pass
        self.processes.close()
        self.tail.close()


@pytest.fixture
def stoppable(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    scenario = Stoppable(settings, tmp_path)
    yield scenario
    scenario.close()


def test_a_kill_stops_the_running_user_code_within_seconds_and_the_try_ends_killed_not_retried(stoppable):
    run_id = trigger(stoppable.settings, DAG_ID)
    user_code, _pids = stoppable.first_try_running(run_id)
    stoppable.command(KillTask(dag_id=DAG_ID, run_id=run_id, task_id="long", request_id=uuid.uuid4().hex,
                               requested_by="test", at=time.time()))
    gone_at = user_code.gone_at(30, "the killed try's bash and sleep")
    finished = stoppable.tail.run_finished(run_id, 60)

    assert finished.state == "failed"
    [requested] = stoppable.tail.of_type(TaskKillRequested, run_id=run_id, task_id="long")
    [killed] = stoppable.tail.of_type(TaskKilled, run_id=run_id, task_id="long")
    [started] = stoppable.tail.of_type(TaskStarted, run_id=run_id, task_id="long")
    assert (requested.try_number, requested.reason) == (1, "killed by an operator")
    assert (killed.try_number, killed.runner_id, killed.reason) == (1, started.runner_id, "killed by an operator")
    assert gone_at - requested.at < 5.0  # the runner obeys within about a second; generous for a loaded host
    kinds = [kind for kind, _try in stoppable.history(run_id, "long")]
    assert kinds.index("TaskStarted") < kinds.index("TaskKillRequested") < kinds.index("TaskKilled")
    assert "TaskFailed" not in kinds and "TaskSucceeded" not in kinds  # killed is the try's only outcome
    assert [event.try_number for event in stoppable.tail.of_type(TaskQueued, run_id=run_id, task_id="long")] == [1]
    assert not stoppable.tail.of_type(TaskStarted, run_id=run_id, task_id="after")


def test_the_same_kill_request_repeated_after_the_run_finished_changes_nothing(stoppable):
    run_id = trigger(stoppable.settings, DAG_ID)
    user_code, _pids = stoppable.first_try_running(run_id)
    request_id = uuid.uuid4().hex
    kill = KillTask(dag_id=DAG_ID, run_id=run_id, task_id="long", request_id=request_id, requested_by="test",
                    at=time.time())
    stoppable.command(kill)
    user_code.gone_at(30, "the killed try's bash and sleep")
    assert stoppable.tail.run_finished(run_id, 60).state == "failed"
    before = len(stoppable.tail.events)

    stoppable.command(kill)  # the same request, late (a client retrying)
    # A new request behind it in the same partition: once its rejection is in the log, the scheduler
    # has read the repeat too.
    probe = uuid.uuid4().hex
    stoppable.command(KillTask(dag_id=DAG_ID, run_id=run_id, task_id="long", request_id=probe,
                               requested_by="test", at=time.time()))
    stoppable.tail.wait_for(lambda _events: stoppable.tail.of_type(CommandRejected, request_id=probe), 60,
                            "the probe's rejection")
    later = [event for event in stoppable.tail.events[before:] if getattr(event, "dag_id", None) == DAG_ID]
    assert [(type(event).__name__, event.request_id) for event in later] == [
        ("KillTask", request_id), ("KillTask", probe), ("CommandRejected", probe)]
    assert [line for line in stoppable.lines() if line[0] == "start"][1:] == []  # no user code ran again


def test_clearing_a_running_try_stops_it_before_the_new_try_starts_and_the_run_succeeds(stoppable):
    run_id = trigger(stoppable.settings, DAG_ID)
    user_code, pids = stoppable.first_try_running(run_id)
    stoppable.command(ClearTask(dag_id=DAG_ID, run_id=run_id, task_id="long", request_id=uuid.uuid4().hex,
                                requested_by="test", at=time.time()))
    gone_at = user_code.gone_at(30, "the cleared try's bash and sleep")
    finished = stoppable.tail.run_finished(run_id, 90)

    assert finished.state == "success"
    assert [int(line[1]) for line in stoppable.lines() if line[0] == "start"] == [1, 2]
    assert_ended_before(stoppable.try_1_as_seen_from(stoppable.starts), pids, "try 2's user code")
    [requested] = stoppable.tail.of_type(TaskKillRequested, run_id=run_id, task_id="long")
    [killed] = stoppable.tail.of_type(TaskKilled, run_id=run_id, task_id="long")
    assert (requested.try_number, killed.try_number, killed.reason) == (1, 1, "cleared")
    assert gone_at - requested.at < 5.0
    history = stoppable.history(run_id, "long")
    assert history.index(("TaskKillRequested", 1)) < history.index(("TaskKilled", 1)) < \
        history.index(("TaskQueued", 2)) < history.index(("TaskStarted", 2)) < history.index(("TaskSucceeded", 2))
    assert ("TaskFailed", 1) not in history and ("TaskSucceeded", 1) not in history
    assert [event.try_number for event in stoppable.tail.of_type(TaskSucceeded, run_id=run_id, task_id="after")] == [1]


def test_marking_a_running_try_success_kills_its_user_code_and_downstream_runs_after_it(stoppable):
    stoppable.processes.start("projector", name="projector")
    run_id = trigger(stoppable.settings, DAG_ID)
    user_code, pids = stoppable.first_try_running(run_id)
    stoppable.command(MarkTask(dag_id=DAG_ID, run_id=run_id, task_id="long", state="success",
                               request_id=uuid.uuid4().hex, requested_by="test", at=time.time()))
    gone_at = user_code.gone_at(30, "the marked try's bash and sleep")
    finished = stoppable.tail.run_finished(run_id, 90)

    assert finished.state == "success"
    [killed] = stoppable.tail.of_type(TaskKilled, run_id=run_id, task_id="long")
    assert (killed.try_number, killed.reason) == (1, "marked success by an operator")
    assert not stoppable.tail.of_type(TaskSucceeded, run_id=run_id, task_id="long")  # none from the runner
    assert not stoppable.tail.of_type(TaskFailed, run_id=run_id, task_id="long")
    assert [event.try_number for event in stoppable.tail.of_type(TaskQueued, run_id=run_id, task_id="long")] == [1]
    events = [(type(event).__name__, getattr(event, "task_id", "")) for event in stoppable.tail.events
              if getattr(event, "run_id", None) == run_id]
    assert events.index(("TaskKilled", "long")) < events.index(("TaskQueued", "after")), events
    assert_ended_before(stoppable.try_1_as_seen_from(stoppable.after), pids, "the downstream task")
    [requested] = stoppable.tail.of_type(TaskKillRequested, run_id=run_id, task_id="long")
    assert gone_at - requested.at < 5.0
    rows = wait_until(lambda: _task_rows(stoppable.settings, run_id, "long", "success"), 60,
                      "the task_instance table to show long as success")
    assert rows["long"]["try_number"] == 1


def assert_ended_before(seen: dict[int, str], pids: list[int], what: str) -> None:
    """As ``what`` started, each process of try 1 had ended (gone, or a zombie not yet reaped)."""
    assert set(seen) == set(pids) and set(seen.values()) <= {"gone", "Z"}, f"{what} started while try 1 ran: {seen}"


def _task_rows(settings, run_id: str, task_id: str, state: str) -> dict[str, dict] | None:
    """`tock tasks list --json` by task, once ``task_id`` shows ``state`` (the projector caught up)."""
    shown = subprocess.run([sys.executable, "-m", "tock_cli", "tasks", "list", DAG_ID, run_id, "--json"],
                           env=environment(settings), capture_output=True, text=True, timeout=60)
    rows = {row["task_id"]: row for row in json.loads(shown.stdout)} if shown.returncode == 0 else {}
    return rows if rows.get(task_id, {}).get("state") == state else None

