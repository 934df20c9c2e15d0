"""Takeovers that test liveness (issue 8, scenarios 3 and 5).

3. The new owner's replay of a long history lasts longer than the heartbeat timeout: the
   tries that kept running meanwhile are adopted, none is declared dead or run again.
5. A scheduler frozen (SIGSTOP, through the fault-injection hook) inside its transaction,
   after its offsets were sent and before the commit, until its partitions moved, then thawed:
   its frozen decisions are either aborted and made again by its successor, or committed
   late and launched by the successor alone. No try is queued, launched or run twice.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import psutil
import pytest
from confluent_kafka.admin import AdminClient

from infra.log import KafkaEventLog, partition_for
from schemas import (
    EVENTS,
    PauseDag,
    TaskAdopted,
    TaskDeclaredDead,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    encode,
)
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, kill_hard, publish_dags, trigger

pytestmark = pytest.mark.scenario

# A released task waits for a file (at most 10 minutes, so a failed test leaves nothing behind).
WAIT_FOR_RELEASE = 'for i in $(seq 3000); do [ -e {release} ] && break; sleep 0.2; done'

LONG_TASKS = '''
from tock import DAG, BashTask

with DAG("{dag_id}", retries=1, retry_delay=0) as dag:
    for index in range({count}):
        BashTask(f"long_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; {wait}')
'''

# Measured on the 2-core development machine: a scheduler replays ~150,000-200,000 of these
# records a second (7.7-11 s for 1.5 million), so the takeover's replay lasts well over the
# 3 s heartbeat timeout below, even on a faster machine.
HISTORY = 1_500_000
HEARTBEAT_TIMEOUT = 3.0

# "assigned partitions [0, 1]: replayed in 9.2 s (0.1 s of it waiting out open transactions, ...)"
REPLAYED = re.compile(r"assigned partitions \[([\d, ]*)\]: replayed in ([\d.]+) s \(([\d.]+) s of it waiting")


def write_dag(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / "dags" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    return path


def replays_of(processes: Processes, name: str) -> list[tuple[set[int], float]]:
    """(partitions, seconds of replay proper) of each takeover a scheduler's log reports; the wait for
    a previous owner's open transaction before it is left out."""
    return [({int(part) for part in partitions.split(",") if part.strip()}, float(total) - float(waiting))
            for partitions, total, waiting in REPLAYED.findall(processes.log_of(name))]


def wait_for_takeover(processes: Processes, name: str, partition: int, timeout: float) -> float:
    """Wait until scheduler log ``name`` reports having taken ``partition`` over; its replay's seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = [seconds for partitions, seconds in replays_of(processes, name) if partition in partitions]
        if found:
            return found[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not take partition {partition} over within {timeout:g} s:\n"
                                 + processes.log_of(name)[-3000:])
        time.sleep(0.2)


def write_history(settings, dag_id: str, records: int) -> None:
    """A long real history for ``dag_id``'s partition: events the scheduler folds (cheaply) on replay."""
    value = encode(PauseDag(dag_id=dag_id, paused=False, requested_by="history", at=time.time()))
    partition = partition_for(dag_id, settings.partitions)
    with KafkaEventLog(settings, client_id="test-history",
                       config={"linger.ms": 50, "batch.num.messages": 100_000}) as event_log:
        for _ in range(records):
            event_log.append_raw(EVENTS, value, dag_id, partition)


def each_try_once(events: list, kind: type) -> Counter:
    return Counter((event.run_id, event.task_id, event.try_number) for event in events if isinstance(event, kind))


# -- 3. a takeover whose replay outlasts the heartbeat timeout ---------------------------------

@pytest.fixture
def quick_timeout_settings(make_settings):
    # Snapshots off: the takeover must replay the long history in full, to outlast the heartbeat
    # timeout (with one, "first" snapshots the partition after its own replay, and "second" is fast).
    settings = make_settings(task_heartbeat_seconds=0.5, task_heartbeat_timeout=HEARTBEAT_TIMEOUT,
                             scheduler_session_timeout=6, scheduler_snapshot_every_events=0,
                             scheduler_snapshot_interval_seconds=0)
    create_topics(settings)
    return settings


@pytest.mark.timeout(900)
def test_takeover_slower_than_the_heartbeat_timeout_adopts_every_living_try(quick_timeout_settings, tmp_path):
    settings, count = quick_timeout_settings, 3
    ran, release = tmp_path / "ran.txt", tmp_path / "release"
    path = write_dag(tmp_path, "long", LONG_TASKS.format(dag_id="long", count=count, ran=ran,
                                                         wait=WAIT_FOR_RELEASE.format(release=release)))
    partition = partition_for("long", settings.partitions)
    write_history(settings, "long", HISTORY)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        first = processes.scheduler("first")
        run_id = trigger(settings, "long")
        # The first scheduler replays the long history before it decides anything: minutes on a busy machine.
        tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= count, 360,
                      f"{count} tries to start")
        kill_hard(first.pid)
        killed_at = time.time()
        processes.scheduler("second")
        replayed = wait_for_takeover(processes, "scheduler-second", partition, 180)
        tail.wait_for(lambda _events: len(tail.of_type(TaskAdopted, run_id=run_id)) >= count, 60,
                      "the living tries to be adopted")
        # Adopted is not yet safe: give the new owner more than a heartbeat timeout of its own
        # to declare anything dead (it would have done so wrongly), then let the tasks end.
        adopted_at = max(event.at for event in tail.of_type(TaskAdopted, run_id=run_id))
        tail.wait_for(lambda _events: time.time() > adopted_at + 2 * HEARTBEAT_TIMEOUT, 60,
                      "two heartbeat timeouts after the adoptions")
        release.touch()
        finished = tail.run_finished(run_id, 120)
    finally:
        release.touch()
        processes.close()
        tail.close()
    assert replayed > HEARTBEAT_TIMEOUT, f"replay took {replayed} s: make HISTORY longer for this machine"
    assert finished.state == "success"
    adopted = tail.of_type(TaskAdopted, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.by_scheduler, event.from_scheduler)
                  for event in adopted) == [(f"long_{index}", 1, "second", "first") for index in range(count)]
    # The tries went unwatched for longer than the heartbeat timeout, and none was judged dead.
    assert min(event.at for event in adopted) - killed_at > HEARTBEAT_TIMEOUT
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert [event for event in tail.of_type(TaskQueued, run_id=run_id) if event.try_number > 1] == []
    assert each_try_once(tail.events, TaskStarted) == Counter(
        {(run_id, f"long_{index}", 1): 1 for index in range(count)})
    assert {(event.task_id, event.try_number) for event in tail.of_type(TaskSucceeded, run_id=run_id)} == {
        (f"long_{index}", 1) for index in range(count)}
    assert sorted(ran.read_text().splitlines()) == [f"long_{index} 1" for index in range(count)]


# -- 5. a scheduler frozen inside its transaction past its session timeout, then thawed --------

# "first" arms the freeze itself, once its launch is committed: the next commit of the
# scheduler that owns it is the one carrying its downstream tasks' TaskQueued.
FROZEN = '''
from tock import DAG, BashTask

with DAG("{dag_id}", retries=1, retry_delay=0) as dag:
    first = BashTask("first", 'echo "first $TOCKRUN_TRY_NUMBER" >> {ran}; sleep 2; touch {freeze}')
    for index in range({count}):
        first >> BashTask(f"after_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; {wait}')
'''


@pytest.fixture
def rare_heartbeat_settings(make_settings):
    # Scheduler heartbeats are commits too: every 30 s, none comes between "first" arming the
    # freeze and the downstream decisions. Nothing in this scenario depends on task heartbeats.
    settings = make_settings(task_heartbeat_seconds=30, task_heartbeat_timeout=120, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def wait_until_stopped(process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while psutil.Process(process.pid).status() != psutil.STATUS_STOPPED:
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"scheduler {process.pid} did not stop itself inside a transaction "
                                 f"within {timeout:g} s (exit code {process.poll()})")
        time.sleep(0.1)


def group_assigned(admin: AdminClient, group: str, client_id: str, partition: int) -> bool:
    """Whether the consumer group has handed ``partition`` to its member ``client_id``."""
    description = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return any(member.client_id == client_id and partition in {
        part.partition for part in member.assignment.topic_partitions} for member in description.members)


def wait_for_group_assignment(settings, client_id: str, partition: int, timeout: float) -> None:
    """Wait until the scheduler group hands ``partition`` to ``client_id`` (before that member has
    waited out the previous owner's transaction and replayed)."""
    admin, group = AdminClient({"bootstrap.servers": settings.bootstrap}), f"{settings.topic_prefix}tock-scheduler"
    deadline = time.monotonic() + timeout
    while not group_assigned(admin, group, client_id, partition):
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not hand partition {partition} to {client_id} within {timeout:g} s")
        time.sleep(0.05)


def wait_for_exit_or_revoke(process: subprocess.Popen, processes: Processes, name: str,
                            timeout: float) -> int | None:
    """A thawed scheduler either exits (fenced) or notices that it lost its partitions: its exit
    code, or None if it is still running 15 s after giving them up."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and "revoked partitions" not in processes.log_of(name):
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} neither exited nor gave up its partitions within {timeout:g} s:\n"
                                 + processes.log_of(name)[-3000:])
        time.sleep(0.1)
    try:
        return process.wait(15)  # a fenced scheduler closes its clients, then exits
    except subprocess.TimeoutExpired:
        return None


def logged_at(log_text: str, message: str) -> float:
    """When a service's log line containing ``message`` was written (epoch seconds)."""
    line = next(line for line in log_text.splitlines() if message in line)
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


THAWS = ["after the successor took over", "as soon as the group hands the partition over"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("thaw", THAWS)
def test_scheduler_frozen_inside_its_transaction_then_thawed_launches_nothing_twice(rare_heartbeat_settings,
                                                                                     tmp_path, thaw):
    """The frozen transaction holds the downstream tasks' TaskQueued (its records may not even
    have left the producer). Thawed after the successor's takeover, it can only fail; thawed
    while the successor still waits it out, it may commit, and then it proves no ownership."""
    settings, count = rare_heartbeat_settings, 3
    ran, release, freeze = tmp_path / "ran.txt", tmp_path / "release", tmp_path / "freeze"
    path = write_dag(tmp_path, "thawed", FROZEN.format(dag_id="thawed", count=count, ran=ran, freeze=freeze,
                                                       wait=WAIT_FOR_RELEASE.format(release=release)))
    partition = partition_for("thawed", settings.partitions)
    frozen = Processes(settings.model_copy(update={"fault_stop_before_commit": freeze}), tmp_path / "logs")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        scheduler_a = frozen.scheduler("a")
        wait_for_takeover(frozen, "scheduler-a", partition, 120)
        run_id = trigger(settings, "thawed")
        wait_until_stopped(scheduler_a, 120)
        processes.scheduler("b")
        if thaw == THAWS[0]:
            wait_for_takeover(processes, "scheduler-b", partition, 180)
            tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 1 + count, 60,
                          "the successor to start the downstream tasks")
        else:
            wait_for_group_assignment(settings, "tock-scheduler-b", partition, 120)
        freeze.unlink()
        os.kill(scheduler_a.pid, signal.SIGCONT)
        thawed_at = time.time()
        a_exit = wait_for_exit_or_revoke(scheduler_a, frozen, "scheduler-a", 120)
        tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 1 + count, 120,
                      "the downstream tasks to start")
        release.touch()
        finished = tail.run_finished(run_id, 120)
    finally:
        release.touch()
        freeze.unlink(missing_ok=True)
        if scheduler_a.poll() is None:
            os.kill(scheduler_a.pid, signal.SIGCONT)
        frozen.close()
        processes.close()
        tail.close()
    log_a = frozen.log_of("scheduler-a")
    [first_done] = tail.of_type(TaskSucceeded, run_id=run_id, task_id="first")
    # Frozen on the commit that followed "first"'s success (log times are to the millisecond).
    assert logged_at(log_a, "fault injection") >= first_done.at - 0.001, "froze before the downstream decisions"
    assert finished.state == "success"
    tries = [f"after_{index}" for index in range(count)] + ["first"]
    once_each = Counter({(run_id, task, 1): 1 for task in tries})
    assert each_try_once(tail.events, TaskQueued) == once_each
    assert each_try_once(tail.events, TaskLaunched) == once_each
    # Every runner launched for a try appends its TaskStarted (its claim), even one that then
    # stands down: one TaskStarted per try means no try was launched twice, committed or not.
    assert each_try_once(tail.events, TaskStarted) == once_each
    assert sorted(ran.read_text().splitlines()) == sorted(f"{task} 1" for task in tries)
    downstream = [event for event in tail.events if isinstance(event, TaskQueued | TaskLaunched)
                  and event.task_id != "first"]
    # Queued by either (the thawed scheduler's commit may land first), launched by the owner only.
    assert {event.scheduler_id for event in downstream if isinstance(event, TaskLaunched)} == {"b"}
    assert len({event.scheduler_id for event in downstream if isinstance(event, TaskQueued)}) == 1
    assert a_exit in (None, 3), log_a[-3000:]
    if a_exit == 3:
        assert "fenced" in log_a
    elif len([seconds for parts, seconds in replays_of(frozen, "scheduler-a") if partition in parts]) < 2:
        # Alive, and never given the partition back: it acted on nothing of the run since the thaw.
        assert [event for event in tail.events if getattr(event, "run_id", None) == run_id and event.at >= thawed_at
                and "a" in (getattr(event, "scheduler_id", None), getattr(event, "by_scheduler", None))] == []


# -- 6. a scheduler killed between a launch and the commit of its TaskLaunched --------------------

UNRECORDED = '''
from tock import DAG, BashTask

with DAG("{dag_id}") as dag:
    BashTask("only", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; {wait}')
'''


@pytest.mark.timeout(600)
def test_a_try_whose_launch_was_never_recorded_is_adopted_by_its_own_handle(rare_heartbeat_settings, tmp_path):
    """The scheduler launches the try, then freezes inside the transaction that records its TaskLaunched
    (the fault file names that event) and is killed there: the log never holds the launch. The runner's
    claim (TaskStarted) names its own handle, so the successor probes it, finds it alive and adopts it,
    and the try is neither launched again nor declared dead."""
    settings = rare_heartbeat_settings
    ran, release, freeze = tmp_path / "ran.txt", tmp_path / "release", tmp_path / "freeze"
    path = write_dag(tmp_path, "unrecorded", UNRECORDED.format(dag_id="unrecorded", ran=ran,
                                                             wait=WAIT_FOR_RELEASE.format(release=release)))
    partition = partition_for("unrecorded", settings.partitions)
    freeze.write_text("TaskLaunched")
    frozen = Processes(settings.model_copy(update={"fault_stop_before_commit": freeze}), tmp_path / "logs")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        scheduler_a = frozen.scheduler("a")
        wait_for_takeover(frozen, "scheduler-a", partition, 120)
        run_id = trigger(settings, "unrecorded")
        wait_until_stopped(scheduler_a, 120)
        [claim] = tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id), 60, "the runner's claim")
        kill_hard(scheduler_a.pid)
        scheduler_a.wait(30)
        processes.scheduler("b")
        [adopted] = tail.wait_for(lambda _events: tail.of_type(TaskAdopted, run_id=run_id), 180,
                                  "the successor to adopt the try")
        release.touch()
        finished = tail.run_finished(run_id, 120)
    finally:
        release.touch()
        freeze.unlink(missing_ok=True)
        frozen.close()
        processes.close()
        tail.close()
    assert logged_at(frozen.log_of("scheduler-a"), "fault injection")  # it froze on the launch's commit
    assert finished.state == "success"
    assert claim.handle and (adopted.handle, adopted.from_scheduler, adopted.by_scheduler) == (claim.handle, "a", "b")
    assert tail.of_type(TaskLaunched, run_id=run_id) == []  # the frozen launch never committed; none again
    assert each_try_once(tail.events, TaskStarted) == Counter({(run_id, "only", 1): 1})
    assert not tail.of_type(TaskDeclaredDead, run_id=run_id)
    assert ran.read_text().splitlines() == ["only 1"]
