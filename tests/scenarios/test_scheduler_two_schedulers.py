"""Scenarios with two schedulers sharing the partitions: one is killed, or frozen past its
session timeout (fencing). Work moves to the survivor without being redone or duplicated."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from infra.log import partition_for, replay
from schemas import (
    SCHEDULERS,
    SchedulerHeartbeat,
    TaskAdopted,
    TaskDeclaredDead,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
)
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, kill_hard, publish_dags, trigger

pytestmark = pytest.mark.scenario

PAIR = '''
from tock import DAG, BashTask

with DAG("{dag_id}", retries=1, retry_delay=0) as dag:
    first = BashTask("first", 'echo "$TOCKRUN_DAG_ID first $TOCKRUN_TRY_NUMBER" >> {ran}; {wait}')
    second = BashTask("second", 'echo "$TOCKRUN_DAG_ID second $TOCKRUN_TRY_NUMBER" >> {ran}')
    first >> second
'''


@pytest.fixture
def settings(make_settings):
    settings = make_settings(task_heartbeat_seconds=0.5, task_heartbeat_timeout=20, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def dag_ids_on_every_partition(partitions: int, per_partition: int = 1) -> list[str]:
    """DAG ids chosen so that every partition holds ``per_partition`` of them."""
    chosen: dict[int, list[str]] = {partition: [] for partition in range(partitions)}
    index = 0
    while any(len(ids) < per_partition for ids in chosen.values()):
        dag_id = f"pair_{index}"
        if len(chosen[partition_for(dag_id, partitions)]) < per_partition:
            chosen[partition_for(dag_id, partitions)].append(dag_id)
        index += 1
    return sorted(dag_id for ids in chosen.values() for dag_id in ids)


def publish_pairs(settings, tmp_path, wait: str) -> tuple[list[str], object]:
    """One pair DAG per partition; each ``first`` task runs ``wait`` (a shell command) after its line."""
    ran = tmp_path / "ran.txt"
    folder = tmp_path / "dags"
    folder.mkdir()
    dag_ids = dag_ids_on_every_partition(settings.partitions)
    for dag_id in dag_ids:
        path = folder / f"{dag_id}.py"
        path.write_text(PAIR.format(dag_id=dag_id, ran=ran, wait=wait))
        publish_dags(settings, path)
    return dag_ids, ran


def owners(settings) -> dict[str, set[int]]:
    """Partitions each scheduler last said it owns (tock.schedulers)."""
    latest: dict[str, set[int]] = {}
    for record in replay(settings, SCHEDULERS):
        if isinstance(record.event, SchedulerHeartbeat):
            latest[record.event.scheduler_id] = set(record.event.partitions)
    return latest


def wait_until_both_own(settings, timeout: float = 180) -> dict[str, set[int]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = owners(settings)
        if found.get("a") and found.get("b") and found["a"] | found["b"] == set(range(settings.partitions)) \
                and not found["a"] & found["b"]:
            return found
        time.sleep(0.5)
    raise AssertionError(f"schedulers did not split the partitions: {owners(settings)}")


def both_running(settings, processes: Processes, tail: LogTail, dag_ids: list[str]):
    """Schedulers "a" and "b" split the partitions, each DAG is triggered and its first task runs.
    Returns (scheduler a's process, run id per DAG, scheduler that queued each task)."""
    scheduler_a = processes.scheduler("a")
    processes.scheduler("b")
    wait_until_both_own(settings)
    runs = {dag_id: trigger(settings, dag_id) for dag_id in dag_ids}
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted)) >= len(dag_ids), 180, "every first task to start")
    # And every launch recorded: a scheduler killed between launching a try and committing its TaskLaunched
    # leaves an orphan with no handle to probe, which no survivor adopts (a known gap, not what these test).
    tail.wait_for(lambda _events: len(tail.of_type(TaskLaunched)) >= len(dag_ids), 180, "every launch recorded")
    return scheduler_a, runs, queued_by(tail)


def queued_by(tail: LogTail) -> dict[tuple[str, str, str], str]:
    return {(event.dag_id, event.run_id, event.task_id): event.scheduler_id for event in tail.of_type(TaskQueued)}


def assert_each_try_queued_and_run_once(tail: LogTail, ran) -> None:
    tries = Counter((event.run_id, event.task_id, event.try_number) for event in tail.of_type(TaskQueued))
    assert [key for key, count in tries.items() if count > 1] == []
    lines = ran.read_text().splitlines()
    assert len(lines) == len(set(lines)) and all(line.endswith(" 1") for line in lines), lines


def test_survivor_adopts_only_the_killed_schedulers_tries(settings, tmp_path):
    # The "first" tasks run until released, after the survivor adopted them: on a busy machine a
    # fixed sleep could end before the takeover, leaving nothing to adopt.
    release = tmp_path / "release"
    dag_ids, ran = publish_pairs(settings, tmp_path, f"while [ ! -e {release} ]; do sleep 0.2; done")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        scheduler_a, runs, owner_of = both_running(settings, processes, tail, dag_ids)
        assert set(owner_of.values()) == {"a", "b"}
        kill_hard(scheduler_a.pid)
        owned_by_a = sum(owner == "a" for owner in owner_of.values())
        tail.wait_for(lambda _events: len(tail.of_type(TaskAdopted)) >= owned_by_a, 180,
                      "the survivor to adopt the killed scheduler's tries")
        release.touch()
        finished = [tail.run_finished(run_id, 120) for run_id in runs.values()]
    finally:
        release.touch()
        processes.close()
        tail.close()
    assert {event.state for event in finished} == {"success"}
    adopted = {(event.dag_id, event.run_id, event.task_id): (event.by_scheduler, event.from_scheduler)
               for event in tail.of_type(TaskAdopted)}
    assert adopted == {key: ("b", "a") for key, owner in owner_of.items() if owner == "a"}
    assert tail.of_type(TaskDeclaredDead) == []
    assert_each_try_queued_and_run_once(tail, ran)


def test_frozen_scheduler_is_fenced_and_nothing_is_queued_twice(settings, tmp_path):
    dag_ids, ran = publish_pairs(settings, tmp_path, "sleep 2")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        scheduler_a, runs, owner_of = both_running(settings, processes, tail, dag_ids)
        os.kill(scheduler_a.pid, signal.SIGSTOP)  # its "first" tasks finish while it is frozen
        paused_at = time.time()
        tail.wait_for(lambda _events: len(tail.of_type(TaskQueued)) >= 2 * len(dag_ids), 60,
                      "the survivor to queue the frozen scheduler's downstream tasks")
        os.kill(scheduler_a.pid, signal.SIGCONT)
        finished = [tail.run_finished(run_id, 120) for run_id in runs.values()]
        time.sleep(3)  # room for any late decision of the thawed scheduler to show up
        tail.wait_for(lambda _events: True, 1, "")
    finally:
        processes.close()
        tail.close()
    assert {event.state for event in finished} == {"success"}
    frozen_owned = {key[:2] for key, owner in owner_of.items() if owner == "a"}
    downstream = {(event.dag_id, event.run_id): event.scheduler_id for event in tail.of_type(TaskQueued)
                  if event.task_id == "second" and event.at > paused_at}
    assert frozen_owned and all(downstream[key] == "b" for key in frozen_owned), downstream
    assert_each_try_queued_and_run_once(tail, ran)
    assert "revoked partitions" in processes.log_of("scheduler-a")
