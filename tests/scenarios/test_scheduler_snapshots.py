"""Scenarios: takeover from a snapshot plus the tail of the log, against the real broker.

The history of the partition is synthetic (tests/synthetic_history.py: events written straight
to the log by the test, as a scheduler and runners would have written them), plus real runs of a
real DAG decided by a real scheduler process, which snapshots the partition and is killed -9.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Mapping

import pytest

from infra.executors import LocalExecutor
from infra.log import settle
from infra.log.latest import latest_value
from schemas import EVENTS, SNAPSHOTS, DagRunFinished
from services.runner import local_launcher_command
from services.scheduler.core import snapshot as snapshot_codec
from services.scheduler.core.model import ENDED
from services.scheduler.core.snapshot import STATE_VERSION, Snapshot, read_header
from services.scheduler.memory import rebuild, restore
from services.scheduler.shell import Scheduler
from tests import synthetic_history as synthetic
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario

DAG = '''
from tock import DAG, BashTask

with DAG("snapdag") as dag:
    BashTask("a", "true") >> BashTask("b", "true")
'''
PARTITION = 0  # one partition: the synthetic history and the real DAG share it


@pytest.fixture
def settings(make_settings):
    settings = make_settings(partitions=1, scheduler_session_timeout=6, task_heartbeat_seconds=0.5,
                             task_heartbeat_timeout=15, scheduler_snapshot_every_events=1000,
                             scheduler_snapshot_interval_seconds=1)
    create_topics(settings)
    return settings


def write_history(settings, runs_per_dag: int, open_tries: int) -> None:
    now = time.time()
    event_log = shared_event_log(settings)
    for event in synthetic.history(["hist0", "hist1"], runs_per_dag, tasks=5, open_tries=open_tries,
                                   start=now - 3600):
        event_log.append(event)
    for event in synthetic.heartbeats_of_open("hist0", 0, open_tries, at=now - 3000):
        event_log.append(event)
    event_log.flush()


# What a live owner folds and a replay does not, by design (memory.py): the owner folds its own
# decisions when they commit, the replay where they lie in the log, and a replay folds all of
# tock.events before tock.heartbeats. A try that ended before its TaskLaunched was read back keeps
# its handle in the owner's fold only; a heartbeat read after the try ended is folded only live.
# Neither field of an ended try is read by any decision.
REPLAY_ORDER_ONLY = ("handle", "launched_at", "last_heartbeat_at")


def comparable(state):
    """A copy of ``state`` without the fields of ended tries that depend on fold order (above)."""
    state = copy.deepcopy(state)
    for run in [*state.runs.values(), *state.finished.values()]:
        for instance in run.tasks.values():
            if instance.state in ENDED:
                for name in REPLAY_ORDER_ONLY:
                    setattr(instance, name, "" if name == "handle" else None)
    return state


def assert_same_state(found, expected) -> None:
    """Equal states; on a difference, name the first differing entry (a whole state is too big to print)."""
    for name in (item.name for item in dataclasses.fields(expected) if item.compare):  # not derived indexes
        mine, theirs = getattr(found, name), getattr(expected, name)
        if isinstance(theirs, Mapping):
            assert list(mine) == list(theirs), f"{name}: keys or their order differ"
            for key, value in theirs.items():
                assert mine[key] == value, f"{name}[{key!r}] differs: {differences(mine[key], value)}"
        assert mine == theirs, f"{name} differs"


def differences(found, expected) -> dict:
    """Fields that differ, down into a run's task instances: (found, expected)."""
    if not hasattr(expected, "__slots__"):
        return {"value": (found, expected)}
    differ = {}
    for name in expected.__slots__:
        mine, theirs = getattr(found, name), getattr(expected, name)
        if name == "tasks" and mine != theirs:
            differ.update({f"tasks[{task}]": differences(mine.get(task), instance)
                           for task, instance in theirs.items() if mine.get(task) != instance})
        elif mine != theirs:
            differ[name] = (mine, theirs)
    return differ


def snapshot_header(settings) -> dict | None:
    found = latest_value(settings, SNAPSHOTS, PARTITION, str(PARTITION), client_id="test-snapshots")
    return None if found is None else read_header(found[1])[0]


def in_process_scheduler(settings, scheduler_id: str) -> tuple[Scheduler, threading.Thread]:
    executors = {"local": LocalExecutor(settings, local_launcher_command())}
    scheduler = Scheduler(settings, executors, scheduler_id=scheduler_id)
    thread = threading.Thread(target=scheduler.run, name=f"scheduler-{scheduler_id}")
    thread.start()
    return scheduler, thread


def stop(scheduler: Scheduler, thread: threading.Thread) -> None:
    scheduler.stop()
    thread.join(60)
    assert not thread.is_alive(), "the scheduler did not stop"


def takeovers_from_snapshot(scheduler: Scheduler) -> float:
    return scheduler.metrics.registry.get_sample_value("tock_scheduler_takeover_from_snapshot_total")


def test_takeover_from_a_snapshot_plus_tail_equals_a_full_replay_and_decides(settings, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    write_history(settings, runs_per_dag=300, open_tries=5)
    path = tmp_path / "dags" / "snapdag.py"
    path.parent.mkdir()
    path.write_text(DAG)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        publish_dags(settings, path)
        first = processes.scheduler("first")
        first_run = trigger(settings, "snapdag")
        assert tail.run_finished(first_run, 120).state == "success"
        finished_at = tail.record_of(tail.of_type(DagRunFinished, run_id=first_run)[0]).offset
        # A snapshot taken after the run's end was read back (every second while records come in).
        wait_until(lambda: (header := snapshot_header(settings)) and header["positions"][EVENTS] > finished_at,
                   60, "a snapshot covering the first run")
        kill_hard(first.pid)
        second_run = trigger(settings, "snapdag")  # the tail: decided by the next owner

        settle(settings, EVENTS, [PARTITION], timeout=60, group_id=f"{settings.topic_prefix}tock-scheduler")
        restored = restore(settings, [PARTITION])
        assert PARTITION in restored, "no readable snapshot"
        snapshot_positions = dict(restored[PARTITION].positions)
        from_snapshot = rebuild(settings, [PARTITION], restored)[PARTITION]
        full = rebuild(settings, [PARTITION])[PARTITION]
        assert snapshot_positions[EVENTS] < full.positions[EVENTS], "no tail after the snapshot"
        assert from_snapshot.positions == full.positions
        assert_same_state(comparable(from_snapshot.state), comparable(full.state))
        assert from_snapshot.state.runs.keys() == full.state.runs.keys()
        # 600 runs finished; each DAG keeps its newest 100 (TOCK_SCHEDULER_FINISHED_RUNS_KEPT), the rest
        # forgotten alike in the replay and in the snapshot plus tail.
        forgotten = sum(runs.count for runs in full.state.forgotten.values())
        assert len(full.state.finished) + forgotten >= 600 and forgotten >= 400

        scheduler, thread = in_process_scheduler(settings, "second")
        try:
            assert tail.run_finished(second_run, 120).state == "success"
            assert takeovers_from_snapshot(scheduler) == 1
        finally:
            stop(scheduler, thread)
    finally:
        processes.close()
        tail.close()
    assert f"restoring snapshots of [{PARTITION}]" in caplog.text


def test_a_snapshot_of_an_older_state_version_is_skipped_and_the_full_history_replayed(settings, caplog,
                                                                                        monkeypatch):
    caplog.set_level(logging.INFO)
    write_history(settings, runs_per_dag=100, open_tries=0)
    full = rebuild(settings, [PARTITION])[PARTITION]
    with monkeypatch.context() as patched:
        patched.setattr(snapshot_codec, "STATE_VERSION", STATE_VERSION - 1)
        older = snapshot_codec.encode_snapshot(Snapshot(PARTITION, full.state, dict(full.positions)))
    event_log = shared_event_log(settings)
    event_log.append_raw(SNAPSHOTS, older, str(PARTITION), PARTITION)
    event_log.flush()
    assert snapshot_header(settings)["version"] == STATE_VERSION - 1

    scheduler, thread = in_process_scheduler(settings, "reader")
    try:
        memory = wait_until(lambda: scheduler.memories.get(PARTITION), 60, "the takeover")
        wait_until(lambda: memory.positions == full.positions, 30, "the replay to reach the end")
        assert memory.state == full.state
        assert takeovers_from_snapshot(scheduler) == 0
    finally:
        stop(scheduler, thread)
    assert (f"snapshot of partition {PARTITION} was written by state version {STATE_VERSION - 1}, this scheduler "
            f"reads {STATE_VERSION} (offset 0 of the snapshots): replaying the full history") in caplog.text


# -- the takeover runs off the poll thread -------------------------------------------------------

CHAIN = '''
from tock import DAG, BashTask

for dag_id in {dag_ids!r}:
    with DAG(dag_id) as dag:
        BashTask("a", "true") >> BashTask("b", "true")
    globals()[dag_id] = dag
'''


class HeldTakeover:
    """Wraps the real takeover work: once armed, the next takeover waits until released, then
    does the real settle + snapshot + replay. A stand-in for a replay slowed by a long history."""

    def __init__(self, work) -> None:
        self.work, self.armed, self.release, self.holding = work, threading.Event(), threading.Event(), []

    def __call__(self, config, takeover):
        if self.armed.is_set():
            self.holding.append(list(takeover.partitions))
            assert self.release.wait(120), "never released"
        return self.work(config, takeover)


def dag_in(settings, partition: int) -> str:
    from infra.log import partition_for

    return next(f"chain{index}" for index in range(1000)
                if partition_for(f"chain{index}", settings.partitions) == partition)


def test_a_held_takeover_does_not_stop_the_scheduler_deciding_its_other_partition(make_settings, tmp_path):
    """While the takeover of a partition is held (its settle + snapshot + replay have not even begun),
    the same scheduler runs a whole DAG run of the partition it already owns: polling, folding,
    deciding and committing go on. Then the held takeover is released and installed. It shows the
    loop is not blocked; it does not measure max.poll.interval.ms (300 s by default) being kept."""
    settings = make_settings(partitions=2, scheduler_session_timeout=6, task_heartbeat_seconds=0.5)
    create_topics(settings)
    dag_ids = [dag_in(settings, 0), dag_in(settings, 1)]
    path = tmp_path / "dags" / "chains.py"
    path.parent.mkdir()
    path.write_text(CHAIN.format(dag_ids=dag_ids))
    publish_dags(settings, path)
    tail = LogTail(settings)
    holder, holder_thread = in_process_scheduler(settings, "holder")
    worker, worker_thread, held = None, None, None
    try:
        wait_until(lambda: len(holder.memories) == 2, 60, "the holder to own both partitions")
        executors = {"local": LocalExecutor(settings, local_launcher_command())}
        worker = Scheduler(settings, executors, scheduler_id="worker")
        held = worker.takeovers._work = HeldTakeover(worker.takeovers._work)
        worker_thread = threading.Thread(target=worker.run, name="scheduler-worker")
        worker_thread.start()
        owned = wait_until(lambda: len(worker.memories) == 1 and set(worker.memories), 60, "the worker's share")
        [mine], [other] = owned, {0, 1} - owned
        held.armed.set()
        stop(holder, holder_thread)  # its partition moves to the worker, whose takeover is held
        wait_until(lambda: held.holding, 60, "the worker's takeover of the holder's partition to start")
        assert held.holding == [[other]]
        run_id = trigger(settings, dag_ids[mine])
        assert tail.run_finished(run_id, 120).state == "success"
        assert other not in worker.memories and other in worker.takeovers.under_way
        held.release.set()
        wait_until(lambda: other in worker.memories, 60, "the held takeover to be installed")
        other_run = trigger(settings, dag_ids[other])
        assert tail.run_finished(other_run, 120).state == "success"
    finally:
        if held is not None:
            held.release.set()
        if holder_thread.is_alive():
            stop(holder, holder_thread)
        if worker_thread is not None:
            stop(worker, worker_thread)
        tail.close()


def test_a_snapshot_larger_than_a_default_kafka_record_is_written(make_settings, caplog):
    """A big partition's snapshot is megabytes: beyond librdkafka's and the broker's 1 MB defaults."""
    caplog.set_level(logging.INFO)
    settings = make_settings(partitions=1, scheduler_snapshot_every_events=1, scheduler_snapshot_interval_seconds=0)
    create_topics(settings)
    event_log = shared_event_log(settings)
    for index in range(3):  # each DagParsed just under 1 MB; random text: the snapshot hardly compresses
        parsed = synthetic.dag_parsed(f"big{index}", 1, time.time())
        bulky = dataclasses.replace(parsed.definition, params_json=json.dumps(
            base64.b64encode(os.urandom(700_000)).decode()))
        event_log.append(dataclasses.replace(parsed, definition=bulky))
    event_log.flush()
    scheduler, thread = in_process_scheduler(settings, "big")
    try:
        found = wait_until(lambda: (found := latest_value(settings, SNAPSHOTS, PARTITION, str(PARTITION),
                                                          client_id="test-snapshots")) and found, 60,
                           "a snapshot")
        assert len(found[1]) > 2 * 1024 * 1024
        assert snapshot_codec.decode_snapshot(found[1]).state == scheduler.memories[PARTITION].state
    finally:
        stop(scheduler, thread)
    assert "put off" not in caplog.text and "not written" not in caplog.text
