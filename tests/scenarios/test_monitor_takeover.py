"""A monitor's takeover (issue 20, item 12): from the partition's snapshot, in the background.

Real monitors (in this process, to read their counters) against the real broker:
- a takeover restores the snapshot the previous owner committed and replays only what follows
  it, not the partition's history, and still writes the one DeadlineMissed the tail owes;
- while a takeover waits out a previous owner's open transaction, the monitor's loop goes on
  (the rebalance callback does not wait); it decides for the partition only once caught up, so
  the miss that transaction held is the only one.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from infra.log import partition_for
from infra.log.config import producer_config
from infra.log.latest import latest_value
from infra.log.producer import produce_event
from schemas import SNAPSHOTS, DagRunCreated, DagRunFinished, DeadlineMissed
from services.monitor.core import RUN_DURATION
from services.monitor.core.snapshot import decode_snapshot
from services.monitor.shell import Monitor
from services.monitor.snapshots import snapshot_key
from tests.scenarios.scheduler_support import LogTail, create_topics, publish_dags, wait_until
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario

DAG_FILE = '''
from tock import DAG, BashTask

with DAG("late", deadline=5) as late:
    BashTask("slow", "sleep 20")
'''
HISTORY_RUNS = 1500
TAIL_RUNS = 10


def in_process_monitor(settings, name: str) -> tuple[Monitor, threading.Thread]:
    monitor = Monitor(settings, monitor_id=name)
    thread = threading.Thread(target=monitor.run, name=f"monitor-{name}", daemon=True)
    thread.start()
    return monitor, thread


def stop(monitor: Monitor, thread: threading.Thread) -> None:
    monitor.stop()
    thread.join(60)
    assert not thread.is_alive(), "the monitor did not stop"


def publish(settings, tmp_path) -> int:
    path = tmp_path / "dags" / "late.py"
    path.parent.mkdir()
    path.write_text(DAG_FILE)
    publish_dags(settings, path)
    return partition_for("late", settings.partitions)


def finished_runs(prefix: str, count: int, start: float) -> list:
    events = []
    for number in range(count):
        at = start + number * 0.5
        events += [DagRunCreated(dag_id="late", run_id=f"{prefix}{number}", logical_date=at, run_type="manual",
                                 dag_fingerprint="fp", scheduler_id="s", at=at),
                   DagRunFinished(dag_id="late", run_id=f"{prefix}{number}", state="success", at=at + 1)]
    return events


def append(settings, events: list) -> None:
    log = shared_event_log(settings)
    for event in events:
        log.append(event)
    log.flush()


def snapshot_of(settings, partition: int):
    found = latest_value(settings, SNAPSHOTS, partition, snapshot_key(partition), client_id="test-monitor-snapshot")
    return None if found is None else decode_snapshot(found[1])


def run_durations(monitor: Monitor, partition: int) -> int:
    with monitor.lock:
        cells = monitor.folds[partition].state.stats.cells
        return sum(aggregate.count for (measure, _key, window, _start), aggregate in cells.items()
                   if measure == RUN_DURATION and window == "tumbling")


def test_a_takeover_restores_the_snapshot_and_replays_only_what_follows_it(make_settings, tmp_path):
    settings = make_settings(monitor_session_timeout=6, monitor_snapshot_interval_seconds=0.5)
    create_topics(settings)
    partition = publish(settings, tmp_path)
    history_start = time.time() - 1800  # within the windows' hour
    append(settings, finished_runs("old", HISTORY_RUNS, history_start))
    tail = LogTail(settings)
    first, first_thread = in_process_monitor(settings, "m1")
    try:
        wait_until(lambda: (snapshot := snapshot_of(settings, partition)) is not None
                   and snapshot.state.events_folded >= 2 * HISTORY_RUNS, 120, "the first monitor's snapshot")
        assert first.taken_over.from_start == settings.partitions  # no snapshot yet: from the start
        stop(first, first_thread)

        late_run = "tail_late"
        now = time.time()
        append(settings, [*finished_runs("new", TAIL_RUNS, now - 10),
                          DagRunCreated(dag_id="late", run_id=late_run, logical_date=now, run_type="manual",
                                        dag_fingerprint="fp", scheduler_id="s", at=now)])
        second, second_thread = in_process_monitor(settings, "m2")
        try:
            miss = tail.wait_for(lambda _events: tail.of_type(DeadlineMissed, run_id=late_run), 60,
                                 "the tail's DeadlineMissed")[0]
            assert miss.deadline == pytest.approx(now + 5)
            assert second.taken_over.from_snapshot == 1
            # The tail (its runs, the late one) and the commit markers around them; not the history.
            assert second.taken_over.records_replayed <= 2 * TAIL_RUNS + 10
            assert run_durations(second, partition) == HISTORY_RUNS + TAIL_RUNS  # the history is in the state
            assert [event.run_id for event in tail.of_type(DeadlineMissed)] == [late_run]
        finally:
            stop(second, second_thread)
    finally:
        tail.close()
        if first_thread.is_alive():
            stop(first, first_thread)


def test_the_loop_goes_on_while_a_takeover_waits_out_an_open_transaction_and_decides_once_caught_up(
        make_settings, tmp_path):
    settings = make_settings(monitor_session_timeout=6)
    create_topics(settings)
    partition = publish(settings, tmp_path)
    overdue = time.time() - 60  # its deadline passed long ago: a monitor deciding now would miss it at once
    append(settings, [DagRunCreated(dag_id="late", run_id="overdue", logical_date=overdue, run_type="manual",
                                    dag_fingerprint="fp", scheduler_id="s", at=overdue)])
    # A previous owner's transaction, left open (frozen, say), holding that run's miss.
    previous = Producer({**producer_config(settings, "test-previous-owner"),
                         "transactional.id": f"{settings.topic_prefix}previous-owner"})
    previous.init_transactions(30)
    previous.begin_transaction()
    produce_event(previous, settings, DeadlineMissed(dag_id="late", run_id="overdue", deadline=overdue + 5,
                                                     at=time.time()))
    previous.flush(30)
    tail = LogTail(settings)
    monitor, thread = in_process_monitor(settings, "m1")
    try:
        wait_until(lambda: monitor.turns > 0 and partition in monitor.takeovers.under_way, 30,
                   "the takeover to start")
        turns = monitor.turns
        time.sleep(2.0)
        assert monitor.turns - turns >= 5, "the monitor's loop stood still while its takeover waited"
        assert partition not in monitor.folds and partition in monitor.takeovers.under_way
        previous.commit_transaction(30)
        wait_until(lambda: partition in monitor.folds, 30, "the takeover to finish")
        time.sleep(2.0)  # turns in which a monitor that had not seen the miss would write one
        assert monitor.fired == 0
        tail.wait_for(lambda _events: tail.of_type(DeadlineMissed), 10, "the previous owner's miss")
        assert len(tail.of_type(DeadlineMissed, run_id="overdue")) == 1
    finally:
        stop(monitor, thread)
        tail.close()
