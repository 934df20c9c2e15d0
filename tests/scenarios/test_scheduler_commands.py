"""Scenarios: operators' commands against a real scheduler and broker (issue 9).

Commands are appended to tock.events as the API and CLI append them; the scheduler
decides, runners run the user code, and the log is read back to check what happened.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psutil
import pytest

from infra.log import KafkaEventLog
from schemas import (
    BackfillFinished,
    ClearTask,
    CommandRejected,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    PauseDag,
    RequestBackfill,
    TaskQueued,
    TaskRemoved,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from services.scheduler.core import manual_run_id
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario

FLAKY = '''
from tock import DAG, BashTask

with DAG("flaky", retries=0) as dag:
    first = BashTask("first", 'echo "first $TOCKRUN_TRY_NUMBER" >> {ran}; test -e {fixed}')
    second = BashTask("second", 'echo "second $TOCKRUN_TRY_NUMBER" >> {ran}')
    first >> second
'''

CHAIN = '''
from tock import DAG, BashTask

with DAG("chain", retries=0) as dag:
    a = BashTask("a", 'echo "a $TOCKRUN_RUN_ID" >> {ran}')
    b = BashTask("b", 'echo "b $TOCKRUN_RUN_ID" >> {ran}; test -e {gate}')
    c = BashTask("c", 'echo "c $TOCKRUN_RUN_ID" >> {ran}')
    a >> b >> c
'''

GATED = '''
from tock import DAG, BashTask

with DAG("gated", retries=0) as dag:
    a = BashTask("a", 'while [ ! -e {gate} ]; do sleep 0.1; done; echo a >> {ran}')
    b = BashTask("b", 'echo b >> {ran}')
    a >> b
'''

HOURLY = '''
from datetime import datetime, timezone
from tock import DAG, BashTask

# Starts in 2100: no scheduled run gets in the backfill's way.
with DAG("hourly", schedule="0 * * * *", start_date=datetime(2100, 1, 1, tzinfo=timezone.utc),
         max_active_runs=3) as dag:
    BashTask("work", 'echo "$TOCKRUN_RUN_ID $(date +%s.%N) start" >> {ran}; sleep 1; '
                     'echo "$TOCKRUN_RUN_ID $(date +%s.%N) end" >> {ran}')
'''


@pytest.fixture
def settings(make_settings):
    settings = make_settings(task_heartbeat_seconds=0.5, task_heartbeat_timeout=10, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


@pytest.fixture
def world(settings, tmp_path):
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    processes.scheduler("operator")
    yield processes, tail
    processes.close()
    tail.close()


def dag_file(tmp_path: Path, name: str, source: str, **paths: Path) -> Path:
    path = tmp_path / "dags" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source.format(**{key: str(value) for key, value in paths.items()}))
    return path


def append(settings, *commands) -> None:
    events = shared_event_log(settings)
    for command in commands:
        events.append(command)
    events.flush()


def processed(settings, tail: LogTail, dag_id: str) -> None:
    """Wait until the scheduler has decided on everything appended for ``dag_id`` so far: a probe
    command on a run that does not exist comes back rejected after all of it (one partition, in order)."""
    probe = uuid.uuid4().hex
    append(settings, ClearTask(dag_id=dag_id, run_id=f"probe-{probe}", task_id="", request_id=probe, at=time.time()))
    tail.wait_for(lambda _: tail.of_type(CommandRejected, request_id=probe), 60, "the probe's rejection")


def lines(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_clear_of_a_failed_task_in_a_failed_run_reruns_it_and_the_run_succeeds(settings, world, tmp_path):
    processes, tail = world
    ran, fixed = tmp_path / "ran.txt", tmp_path / "fixed"
    publish_dags(settings, dag_file(tmp_path, "flaky", FLAKY, ran=ran, fixed=fixed))
    run_id = trigger(settings, "flaky")
    assert tail.run_finished(run_id, 60).state == "failed"
    fixed.touch()
    clear = ClearTask(dag_id="flaky", run_id=run_id, task_id="first", request_id=uuid.uuid4().hex, at=time.time())
    append(settings, clear)
    tail.wait_for(lambda _: len(tail.of_type(DagRunFinished, run_id=run_id)) == 2, 60, "the run to finish again")
    assert [event.state for event in tail.of_type(DagRunFinished, run_id=run_id)] == ["failed", "success"]
    assert len(tail.of_type(DagRunReopened, run_id=run_id)) == 1
    assert lines(ran) == ["first 1", "first 2", "second 1"]  # user code ran twice in all for "first"
    append(settings, clear)  # the same request, repeated after the run finished: nothing happens
    processed(settings, tail, "flaky")
    assert len(tail.of_type(TaskQueued, run_id=run_id)) == 3 and lines(ran) == ["first 1", "first 2", "second 1"]


def test_clear_downstream_reruns_the_task_and_everything_after_it(settings, world, tmp_path):
    processes, tail = world
    ran, gate = tmp_path / "ran.txt", tmp_path / "gate"
    gate.touch()
    publish_dags(settings, dag_file(tmp_path, "chain", CHAIN, ran=ran, gate=gate))
    run_id = trigger(settings, "chain")
    assert tail.run_finished(run_id, 60).state == "success"
    append(settings, ClearTask(dag_id="chain", run_id=run_id, task_id="b", downstream=True,
                               request_id=uuid.uuid4().hex, at=time.time()))
    tail.wait_for(lambda _: len(tail.of_type(DagRunFinished, run_id=run_id)) == 2, 60, "the rerun to finish")
    assert [line.split()[0] for line in lines(ran)] == ["a", "b", "c", "b", "c"]
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskSucceeded, run_id=run_id)) == [
        ("a", 1), ("b", 1), ("b", 2), ("c", 1), ("c", 2)]


def test_the_same_trigger_repeated_before_and_after_its_run_finished_makes_one_run(settings, world, tmp_path):
    processes, tail = world
    ran, gate = tmp_path / "ran.txt", tmp_path / "gate"
    gate.touch()
    publish_dags(settings, dag_file(tmp_path, "chain", CHAIN, ran=ran, gate=gate))
    request = TriggerDagRun(dag_id="chain", request_id=uuid.uuid4().hex, requested_by="test", at=time.time())
    append(settings, request, request)
    run_id = manual_run_id(request.request_id)
    assert tail.run_finished(run_id, 60).state == "success"
    append(settings, request)
    processed(settings, tail, "chain")
    assert len(tail.of_type(DagRunCreated, dag_id="chain")) == 1
    assert len(lines(ran)) == 3


def test_pause_with_an_open_run_starts_no_new_task_until_unpause(settings, world, tmp_path):
    processes, tail = world
    ran, gate = tmp_path / "ran.txt", tmp_path / "gate"
    publish_dags(settings, dag_file(tmp_path, "gated", GATED, ran=ran, gate=gate))
    run_id = trigger(settings, "gated")
    tail.wait_for(lambda _: tail.of_type(TaskStarted, run_id=run_id, task_id="a"), 60, "a to start")
    append(settings, PauseDag(dag_id="gated", paused=True, requested_by="test", at=time.time()))
    processed(settings, tail, "gated")
    gate.touch()  # a finishes while its DAG is paused: a running try is not stopped by a pause
    tail.wait_for(lambda _: tail.of_type(TaskSucceeded, run_id=run_id, task_id="a"), 60, "a to finish")
    processed(settings, tail, "gated")  # a's success was folded and decided upon
    assert tail.of_type(TaskQueued, run_id=run_id, task_id="b") == [], "a task started while its DAG was paused"
    append(settings, PauseDag(dag_id="gated", paused=False, requested_by="test", at=time.time()))
    assert tail.run_finished(run_id, 60).state == "success"
    assert lines(ran) == ["a", "b"]


def test_a_dag_deleted_with_a_run_open_ends_the_run_and_the_scheduler_idles(settings, world, tmp_path):
    processes, tail = world
    ran, gate = tmp_path / "ran.txt", tmp_path / "gate"
    publish_dags(settings, dag_file(tmp_path, "gated", GATED, ran=ran, gate=gate))
    run_id = trigger(settings, "gated")
    tail.wait_for(lambda _: tail.of_type(TaskStarted, run_id=run_id, task_id="a"), 60, "a to start")
    with KafkaEventLog(settings, client_id="test-processor") as events:
        events.tombstone("dags", "gated")  # what the DAG processor writes when the file is gone
    finished = tail.run_finished(run_id, 60)  # a is stopped (it would wait for its gate for ever)
    assert (finished.state, finished.reason) == ("failed", "DAG gated was deleted (its file is gone)")
    assert sorted(event.task_id for event in tail.of_type(TaskRemoved, run_id=run_id)) == ["a", "b"]
    assert lines(ran) == []
    scheduler = psutil.Process(processes.started[0].pid)
    before = scheduler.cpu_times()
    time.sleep(5)
    after = scheduler.cpu_times()
    used = (after.user + after.system) - (before.user + before.system)
    assert used < 1.5, f"the scheduler used {used:.2f} s of CPU in 5 s with nothing to do: it spins"


@pytest.mark.timeout(300)
def test_a_backfill_of_10_intervals_runs_each_once_within_max_active_runs(settings, world, tmp_path):
    processes, tail = world
    ran = tmp_path / "ran.txt"
    publish_dags(settings, dag_file(tmp_path, "hourly", HOURLY, ran=ran))
    start = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    request = RequestBackfill(dag_id="hourly", request_id=uuid.uuid4().hex, start_date=start,
                              end_date=start + 9 * 3600, requested_by="test", at=time.time())
    append(settings, request, request)
    done = tail.wait_for(lambda _: tail.of_type(BackfillFinished, backfill_id=request.request_id), 180,
                         "the backfill to finish")
    assert done[0].state == "success"
    created = tail.of_type(DagRunCreated, dag_id="hourly")
    assert sorted(event.logical_date for event in created) == [start + hour * 3600 for hour in range(10)]
    assert {event.run_type for event in created} == {"backfill"}
    assert _most_at_once(lines(ran)) <= 3


def _most_at_once(ran: list[str]) -> int:
    """The most tries running at one moment, from their start and end lines."""
    marks = sorted((float(stamp), 1 if kind == "start" else -1) for _run, stamp, kind in map(str.split, ran))
    running = most = 0
    for _stamp, step in marks:
        running += step
        most = max(most, running)
    return most
