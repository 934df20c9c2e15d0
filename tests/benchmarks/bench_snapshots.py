"""Takeover of a partition with a long history: full replay against latest snapshot + tail.

The history is SYNTHETIC: 2,000,000 events written by the bench (tests/synthetic_history.py: as a
scheduler and runners would have written them: finished runs of 10-task chains, and 200 open tries
on an executor no scheduler runs here, so they stay orphans), not produced by real runs. A Scheduler
thread in the bench's process takes the partition over twice:

1. with no snapshot (full replay); it is then stopped gracefully, and its goodbye commit writes the
   partition's snapshot;
2. a second one, after a tail of fresh events, from that snapshot.

"Decisions" = the DagRunCreated of a run triggered just before each takeover (decided in the first
turn after the takeover, with the adoptions); measured from the scheduler's assignment.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from infra.executors import LocalExecutor
from infra.log import EventReader, KafkaEventLog
from infra.log.latest import latest_value
from infra.topics import topic_name
from schemas import EVENTS, SNAPSHOTS, DagRunCreated, TriggerDagRun
from services.runner import local_launcher_command
from services.scheduler.core.snapshot import decode_snapshot
from services.scheduler.memory import snapshot_of
from services.scheduler.shell import Scheduler
from services.scheduler.snapshot_encoding import SnapshotEncoder
from tests import synthetic_history as synthetic
from tests.benchmarks.common import bench_settings, figure
from tests.benchmarks.w3_takeover import drop_topics, load

EVENTS_WANTED = int(os.environ.get("BENCH_SNAPSHOT_EVENTS", 2_000_000))
OPEN_TRIES = 200
TASKS, DAGS = 10, 20
EVENTS_PER_RUN = 3 + 4 * TASKS  # trigger, created, 4 per task, finished
TAIL_RUNS = 200  # ~8,600 events after the snapshot
PRODUCER = {"linger.ms": 200, "batch.num.messages": 100_000, "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"}


def write_history(settings, count: int) -> None:
    runs_per_dag = max(1, count // (EVENTS_PER_RUN * DAGS))
    dag_ids = [f"hist{index}" for index in range(DAGS)]
    started, written = time.time(), 0
    with KafkaEventLog(settings, client_id="bench-history", config=PRODUCER) as event_log:
        for event in synthetic.history(dag_ids, runs_per_dag, TASKS, OPEN_TRIES, start=time.time() - 86_400):
            event_log.append(event)
            written += 1
            if written % 250_000 == 0:
                print(f"     ... {written:,} events written ({time.time() - started:.0f} s, {load()})", flush=True)
        for event in synthetic.heartbeats_of_open(dag_ids[0], 0, OPEN_TRIES, at=time.time()):
            event_log.append(event)
        event_log.append(synthetic.dag_parsed("bench_snap", 1, time.time(), executor="local"))
    print(f"     {written:,} synthetic events written in {time.time() - started:.0f} s", flush=True)


def write_tail(settings) -> None:
    with KafkaEventLog(settings, client_id="bench-tail", config=PRODUCER) as event_log:
        for number in range(TAIL_RUNS):
            for event in synthetic.finished_run("hist1", 1_000_000 + number, TASKS, time.time()):
                event_log.append(event)


def trigger(settings, request_id: str) -> str:
    with KafkaEventLog(settings, client_id="bench-trigger") as event_log:
        event_log.append(TriggerDagRun(dag_id="bench_snap", request_id=request_id, at=time.time()))
    return f"manual__{request_id}"


def take_over(settings, name: str, request_id: str) -> tuple[Scheduler, threading.Thread, float]:
    """A Scheduler thread takes the partition over; seconds from its assignment to the triggered run's creation.
    The run is watched from the end of the log as it is now: reading the history in this process would
    take the scheduler thread's CPU (one interpreter lock)."""
    watch = EventReader(settings, [], client_id="bench-watch")
    _low, end = watch.watermarks(topic_name(settings.topic_prefix, EVENTS), 0)
    watch.assign([(EVENTS, 0, end)])
    run_id = trigger(settings, request_id)
    scheduler = Scheduler(settings, {"local": LocalExecutor(settings, local_launcher_command())}, scheduler_id=name)
    thread = threading.Thread(target=scheduler.run, name=name)
    thread.start()
    try:
        created = wait_for_created(watch, run_id)
    finally:
        watch.close()
    return scheduler, thread, created.at - scheduler.assigned_at[0]


def wait_for_created(watch: EventReader, run_id: str, timeout: float = 900) -> DagRunCreated:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in watch.poll(0.5):
            if isinstance(record.event, DagRunCreated) and record.event.run_id == run_id:
                return record.event
    raise TimeoutError(f"{run_id} was not created within {timeout:g} s")


def stop(scheduler: Scheduler, thread: threading.Thread) -> None:
    scheduler.stop()
    thread.join(120)


def decision_pause(memory) -> None:
    """What a periodic snapshot of this memory costs the decision thread: encoding it in-process (before
    issue 26) against forking the child that encodes it (now), and how long the child takes."""
    started = time.perf_counter()
    snapshot_of(memory)
    figure("periodic snapshot, encoded on the decision thread: its pause", time.perf_counter() - started, "s")
    encoder = SnapshotEncoder()
    started = time.perf_counter()
    encoder.start(0, memory)
    figure("periodic snapshot, forked to a child: the decision thread's pause", time.perf_counter() - started, "s",
           "no pause")
    while not (done := encoder.collect()):
        time.sleep(0.005)
    figure("  ... the child's encoding, beside the decisions", done[0].seconds, "s")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tock.scheduler").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        # Every finished run kept (not the default 100 per DAG): the worst case a snapshot must carry.
        settings = bench_settings(Path(tmp), partitions=1, task_heartbeat_timeout=600,
                                  scheduler_finished_runs_kept=1_000_000,
                                  scheduler_snapshot_every_events=0, scheduler_snapshot_interval_seconds=0)
        try:
            run(settings)
        finally:
            drop_topics(settings)


def run(settings) -> None:
    print(f"  (SYNTHETIC history: {EVENTS_WANTED:,} events written by the bench, {OPEN_TRIES} open tries; {load()})")
    write_history(settings, EVENTS_WANTED)
    full, full_thread, full_seconds = take_over(settings, "full", "first")
    figure("takeover by full replay: assignment -> decisions", full_seconds, "s")
    memory = full.holdings.memories[0]  # kept: a stop may forget it
    stop(full, full_thread)  # the goodbye commit writes the snapshot (encoded in-process: it is stopping)
    encode = full.metrics.registry.get_sample_value("tock_scheduler_snapshot_seconds_sum")
    figure("snapshot encode at the goodbye (CPU, on the decision thread)", encode or 0.0, "s")
    decision_pause(memory)
    found = latest_value(settings, SNAPSHOTS, 0, "0")
    if found is None:
        raise SystemExit("  !! no snapshot was written by the graceful stop (see the scheduler's log above)")
    _offset, value = found
    figure("snapshot size (compressed record)", len(value) / 1e6, "MB")
    started = time.process_time()
    snapshot = decode_snapshot(value)
    figure("snapshot decode (CPU, in the bench process)", time.process_time() - started, "s")
    print(f"     ({len(snapshot.state.finished):,} finished runs, {len(snapshot.state.runs):,} open runs, "
          f"{len(snapshot.state.live):,} live tries in the snapshot)")
    write_tail(settings)
    second, second_thread, snapshot_seconds = take_over(settings, "from-snapshot", "second")
    used = second.metrics.registry.get_sample_value("tock_scheduler_takeover_from_snapshot_total")
    stop(second, second_thread)
    figure(f"takeover from snapshot + tail of ~{TAIL_RUNS * EVENTS_PER_RUN:,} events: assignment -> decisions",
           snapshot_seconds, "s", "<= 2 s")
    print(f"     (snapshot used: {used == 1}; {load()})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
