"""Broker outage (issue 8, scenarios 1 and 2): the broker stops for three heartbeat timeouts.

Four tries run long tasks through the whole outage and a fifth task finishes 30 s into it.
An outage is not evidence: nothing is declared dead, each task's user code starts once, the
short task's outcome waits in its runner and is appended after the restart, the services keep
running and the run succeeds. The long tasks (about 5 minutes) run on until a whole timeout
after the scheduler commits again, so they are also judged on evidence read after the outage.
Runs against a private broker (own home and random ports) so the session's shared broker is
never stopped under other tests.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest

from infra.broker import LocalKafkaBroker
from infra.log import EventReader, LogRecord
from infra.settings import Settings, load_settings
from infra.topics import topic_name
from schemas import (
    EVENTS,
    SCHEDULERS,
    SchedulerHeartbeat,
    TaskDeclaredDead,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    free_port,
    trigger,
    wait_until_published,
)

pytestmark = [pytest.mark.scenario, pytest.mark.apart]

HEARTBEAT_TIMEOUT = 60
OUTAGE_SECONDS = 3 * HEARTBEAT_TIMEOUT
SHORT_ENDS_INTO_OUTAGE = 30  # its outcome then waits 2.5 minutes for the broker
# After the broker is back the scheduler grants runners a whole timeout before it judges
# anyone; the long tasks run this much longer, so it judges them on post-outage evidence.
JUDGED_FOR = 20
LONG_TASKS = [f"long_{number}" for number in range(1, 5)]
TASKS = sorted(["warmup", "short", *LONG_TASKS])

# The user code talks to the test through files in MARKS: "<task>.starts" gets one line per
# start of that task's user code; "go" (the short task ends) and "finish" (the long ones end)
# are the test's signals.
DAG_FILE = r'''
import pathlib
import time

from tock import DAG, task

MARKS = pathlib.Path({marks!r})


def started(name):
    with open(MARKS / (name + ".starts"), "a") as starts:
        starts.write("%f\n" % time.time())


def wait_for_signal(name, limit=900):
    deadline = time.time() + limit
    while not (MARKS / name).exists():
        if time.time() > deadline:
            raise TimeoutError("no %s signal" % name)
        time.sleep(0.2)


def run_long(name):
    started(name)
    wait_for_signal("finish")


with DAG("outage", retries=1, retry_delay=0) as dag:
    @task
    def warmup():
        started("warmup")

    @task
    def short():
        started("short")
        wait_for_signal("go")
        (MARKS / "short.ended").write_text(repr(time.time()))

    for name in {long_tasks!r}:
        task(task_id=name)(run_long)(name)
    warmup() >> short()  # launched after the others: its runner holds no other try
'''


@pytest.fixture
def private_broker(tmp_path):
    port = free_port()
    broker = LocalKafkaBroker(load_settings({
        "TOCK_HOME": str(tmp_path / "broker-home"), "TOCK_BROKER_PORT": str(port),
        "TOCK_CONTROLLER_PORT": str(free_port(port)), "TOCK_BROKER_HEAP": "256M"}))
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.timeout(900)
def test_no_try_dies_and_no_outcome_is_lost_in_a_broker_outage(tmp_path, make_settings, private_broker):
    marks, dags = tmp_path / "marks", tmp_path / "dags"
    marks.mkdir()
    dags.mkdir()
    (dags / "outage.py").write_text(DAG_FILE.format(marks=str(marks), long_tasks=LONG_TASKS))
    settings = make_settings(kafka_bootstrap=private_broker.address, dags_folder=dags,
                             task_heartbeat_seconds=1, task_heartbeat_timeout=HEARTBEAT_TIMEOUT)
    create_topics(settings)
    services, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processor = services.start("dag-processor", name="dag-processor")
        scheduler = services.scheduler("outage-test")
        wait_until_published(settings, "outage")
        run_id = trigger(settings, "outage")
        _wait_until_all_run(tail, run_id, marks)
        ends_before_outage = _end_offsets(tail, settings)

        outage = _outage(private_broker, marks, [processor, scheduler])
        _wait_for_scheduler_commit(settings, "outage-test", outage.restarted_at, 240)
        time.sleep(HEARTBEAT_TIMEOUT + JUDGED_FOR)  # runners are judged now, while they still run
        (marks / "finish").touch()

        assert tail.run_finished(run_id, 120).state == "success"
        assert processor.poll() is None and scheduler.poll() is None, "a service died after the outage"
        assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
        _assert_each_task_ran_once(tail, run_id, marks)
        # The short task ended during the outage and waited over 2 minutes for the broker; its
        # TaskSucceeded lies past the log's end before the outage: it was appended after the restart.
        assert outage.stopped_at < outage.short_ended_at and outage.restarted_at - outage.short_ended_at >= 120
        [succeeded] = tail.of_type(TaskSucceeded, run_id=run_id, task_id="short")
        record = tail.record_of(succeeded)
        assert record.offset >= ends_before_outage[(record.topic, record.partition)]
        scheduler_log = services.log_of("scheduler-outage-test")
        assert "broker unreachable" in scheduler_log
        # Taking its partitions back without orphans once made the scheduler spin, logging this each turn.
        assert scheduler_log.count("orphan(s)") < 100
    finally:
        tail.close()
        services.close()
        _stop_leftover_runners(tail, settings)


class Outage(NamedTuple):
    stopped_at: float
    short_ended_at: float
    restarted_at: float


def _outage(broker: LocalKafkaBroker, marks: Path, services: list[subprocess.Popen]) -> Outage:
    """Stop the broker for OUTAGE_SECONDS; the short task ends SHORT_ENDS_INTO_OUTAGE s into it."""
    broker.stop()
    stopped_at = time.time()
    time.sleep(SHORT_ENDS_INTO_OUTAGE)
    (marks / "go").touch()
    short_ended_at = float(_wait_for_file(marks / "short.ended", 60))
    time.sleep(max(0.0, stopped_at + OUTAGE_SECONDS - time.time()))  # the outage itself
    assert all(service.poll() is None for service in services), "a service died during the outage"
    broker.start()
    return Outage(stopped_at, short_ended_at, time.time())


def _wait_for_scheduler_commit(settings: Settings, scheduler_id: str, after: float, timeout: float) -> None:
    """Wait until the scheduler commits again, owning every partition: its first SchedulerHeartbeat
    decided after ``after`` is read (read_committed) from tock.schedulers."""
    def owning_all(record: LogRecord) -> bool:
        beat = record.event
        return (isinstance(beat, SchedulerHeartbeat) and beat.scheduler_id == scheduler_id and beat.at > after
                and len(beat.partitions) == settings.partitions)

    reader = EventReader(settings, [], client_id="test-schedulers")
    reader.assign([(SCHEDULERS, partition, 0) for partition in range(settings.partitions)])
    deadline = time.monotonic() + timeout
    try:
        while not any(owning_all(record) for record in reader.poll(0.5)):
            if time.monotonic() > deadline:
                raise AssertionError(f"scheduler {scheduler_id} did not commit within {timeout:g} s "
                                     "of the broker's restart")
    finally:
        reader.close()


def _wait_until_all_run(tail: LogTail, run_id: str, marks: Path) -> None:
    """Every try launched (committed) and running its user code; the short one in a runner of its own."""

    def all_run(_events) -> bool:
        launched = {event.task_id for event in tail.of_type(TaskLaunched, run_id=run_id)}
        started = {event.task_id for event in tail.of_type(TaskStarted, run_id=run_id)}
        return (launched == started == set(TASKS)
                and all((marks / f"{name}.starts").exists() for name in TASKS))

    tail.wait_for(all_run, 120, "every try to be launched and run its user code")
    runner_of = {event.task_id: event.pid for event in tail.of_type(TaskStarted, run_id=run_id)}
    assert runner_of["short"] not in {runner_of[name] for name in LONG_TASKS}, \
        "the short task must have a runner of its own, which ends with it: that is the case under test"


def _end_offsets(tail: LogTail, settings: Settings) -> dict[tuple[str, int], int]:
    topic = topic_name(settings.topic_prefix, EVENTS)
    return {(topic, partition): tail.reader.watermarks(topic, partition)[1] for partition in range(settings.partitions)}


def _wait_for_file(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear within {timeout:g} s")
        time.sleep(0.1)
    return path.read_text()


def _assert_each_task_ran_once(tail: LogTail, run_id: str, marks: Path) -> None:
    for kind in (TaskQueued, TaskStarted, TaskSucceeded):
        per_task = sorted((event.task_id, event.try_number) for event in tail.of_type(kind, run_id=run_id))
        assert per_task == [(name, 1) for name in TASKS], kind.__name__
    starts = {name: len((marks / f"{name}.starts").read_text().splitlines()) for name in TASKS}
    assert starts == dict.fromkeys(TASKS, 1), "user-code starts per task"


def _stop_leftover_runners(tail: LogTail, settings: Settings) -> None:
    """A failed test leaves runners waiting for a broker that is about to stop for good: end this
    test's runners (a runner's death ends its user code)."""
    for started in tail.of_type(TaskStarted):
        try:
            runner = psutil.Process(started.pid)
            if runner.environ().get("TOCK_HOME") == str(settings.home):
                runner.kill()
        except psutil.Error:
            pass
