"""Monitor benchmarks: how fast it folds, and how late it writes a DeadlineMissed under load.

Run: .venv/bin/python -m tests.benchmarks.bench_monitor   (or: python -m tests.benchmarks monitor)

Every event here is SYNTHETIC: written by the bench (no scheduler, no runners), shaped as a
scheduler and runners write them (run created, try queued / launched / started / succeeded,
run finished). The monitor is the real one (services/monitor/shell.py) on the real broker,
run in this process on a thread.

* core fold: the pure fold alone (no Kafka, no decoding), events/s.
* takeover replay: a fresh monitor assigned a log written beforehand: read_committed,
  decode and fold from offset 0 until its fold counts every event, events/s.
* live: a monitor owning every partition folds a burst appended as fast as one writer can
  (the figure is bounded by the writer too), events/s.
* deadline firing delay: a background writer appends ~1,000 events/s (synthetic runs of
  other DAGs) while runs of a DAG with ``deadline=1`` start; for each, the time from its
  deadline to the DeadlineMissed being readable by another consumer (a tail reading
  read_committed), and to the record's broker timestamp.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from infra.log import EventReader, KafkaEventLog
from schemas import (
    EVENTS,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DeadlineMissed,
    TaskDefinition,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from services.monitor.core import fold
from services.monitor.shell import Monitor
from tests.benchmarks.common import bench_settings, figure, spread

FOLD_RUNS = 20_000  # x 6 events
REPLAY_RUNS = 20_000
BACKGROUND_RATE = 1_000.0  # events/s
DEADLINE_RUNS = 10
DEADLINE = 1.0


def synthetic_run(dag_id: str, run_id: str, at: float) -> list:
    """The events of one synthetic one-task run (6 events)."""
    common = {"dag_id": dag_id, "run_id": run_id, "task_id": "t", "try_number": 1}
    return [DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual", dag_fingerprint="fp",
                          scheduler_id="bench", at=at),
            TaskQueued(**common, executor="local", queue="default", scheduler_id="bench", at=at + 0.01),
            TaskLaunched(**common, executor="local", handle="1@h:1", scheduler_id="bench", at=at + 0.02),
            TaskStarted(**common, runner_id="r", hostname="h", pid=1, at=at + 0.05),
            TaskSucceeded(**common, runner_id="r", at=at + 0.5),
            DagRunFinished(dag_id=dag_id, run_id=run_id, state="success", at=at + 0.6)]


def definition(dag_id: str, deadline: float | None) -> DagParsed:
    dag = DagDefinition(dag_id=dag_id, file_path=f"/bench/{dag_id}.py", deadline=deadline,
                        tasks=[TaskDefinition(task_id="t", kind="bash", command="true")])
    return DagParsed(dag_id=dag_id, file_path=dag.file_path, fingerprint="fp", definition=dag, at=time.time())


def bench_core_fold() -> None:
    now = time.time()
    events = [event for index in range(FOLD_RUNS)
              for event in synthetic_run(f"dag{index % 50}", f"r{index}", now + index * 0.01)]
    started = time.perf_counter()
    fold(events)
    elapsed = time.perf_counter() - started
    figure("core fold (synthetic events, no Kafka)", len(events) / elapsed, "events/s")


def run_monitor(settings) -> tuple[Monitor, threading.Thread]:
    monitor = Monitor(settings, monitor_id="bench")
    thread = threading.Thread(target=monitor.run, name="monitor", daemon=True)
    thread.start()
    return monitor, thread


def folded(monitor: Monitor) -> int:
    with monitor.lock:
        return sum(part.state.events_folded for part in monitor.folds.values())


def bench_replay(tmp: Path) -> None:
    settings = bench_settings(tmp / "replay", monitor_session_timeout=6)
    now = time.time()
    with KafkaEventLog(settings, client_id="bench-writer") as log:
        for index in range(REPLAY_RUNS):
            for event in synthetic_run(f"dag{index % 50}", f"r{index}", now - 3000 + index * 0.1):
                log.append(event)
    total = REPLAY_RUNS * 6
    started = time.monotonic()
    monitor, thread = run_monitor(settings)
    try:
        while folded(monitor) < total:
            if time.monotonic() - started > 120:
                raise RuntimeError(f"the monitor folded {folded(monitor)} of {total} events in 120 s")
            time.sleep(0.01)
        elapsed = time.monotonic() - started
    finally:
        monitor.stop()
        thread.join(30)
    figure(f"takeover: join, replay, decode, fold {total:,} events", elapsed, "s")
    figure("takeover replay rate (synthetic events, real broker)", total / elapsed, "events/s")


def bench_live(tmp: Path) -> None:
    """A monitor already owning every partition folds a burst appended as fast as the writer can."""
    settings = bench_settings(tmp / "live", monitor_session_timeout=6)
    monitor, thread = run_monitor(settings)
    total = REPLAY_RUNS * 6
    try:
        while not monitor.folds:
            time.sleep(0.05)
        started = time.monotonic()
        now = time.time()
        with KafkaEventLog(settings, client_id="bench-burst") as log:
            for index in range(REPLAY_RUNS):
                for event in synthetic_run(f"dag{index % 50}", f"r{index}", now + index * 0.01):
                    log.append(event)
            log.flush()
            written = time.monotonic() - started
        while folded(monitor) < total:
            if time.monotonic() - started > 120:
                raise RuntimeError(f"the monitor folded {folded(monitor)} of {total} events in 120 s")
            time.sleep(0.01)
        elapsed = time.monotonic() - started
    finally:
        monitor.stop()
        thread.join(30)
    figure(f"live: burst of {total:,} synthetic events, written in {written:.2f} s, all folded", elapsed, "s")
    figure("live fold rate (synthetic events, real broker)", total / elapsed, "events/s")


def background_load(settings, stop: threading.Event, written: list[int]) -> None:
    """~BACKGROUND_RATE synthetic events/s of 50 DAGs without deadlines, in 10 ms batches."""
    per_tick, index = max(1, int(BACKGROUND_RATE / 100 / 6)), 0
    with KafkaEventLog(settings, client_id="bench-load") as log:
        next_tick = time.monotonic()
        while not stop.is_set():
            for _ in range(per_tick):
                for event in synthetic_run(f"busy{index % 50}", f"b{index}", time.time()):
                    log.append(event)
                index += 1
            written[0] = index * 6
            next_tick += 0.01 * per_tick * 6 / (BACKGROUND_RATE / 100)
            time.sleep(max(0.0, next_tick - time.monotonic()))


def start_runs(settings) -> None:
    """DEADLINE_RUNS synthetic runs of the DAG "due", one every 0.5 s."""
    with KafkaEventLog(settings, client_id="bench-runs") as log:
        for index in range(DEADLINE_RUNS):
            log.append(DagRunCreated(dag_id="due", run_id=f"due{index}", logical_date=time.time(), run_type="manual",
                                     dag_fingerprint="fp", scheduler_id="bench", at=time.time()))
            log.flush()
            time.sleep(0.5)


def bench_deadline_delay(tmp: Path) -> None:
    settings = bench_settings(tmp / "delay", monitor_session_timeout=6)
    with KafkaEventLog(settings, client_id="bench-dags") as log:
        log.append(definition("due", DEADLINE))
    stop, written = threading.Event(), [0]
    load = threading.Thread(target=background_load, args=(settings, stop, written), daemon=True)
    monitor, thread = run_monitor(settings)
    tail = EventReader(settings, [], client_id="bench-tail")
    tail.assign([(EVENTS, partition, 0) for partition in range(settings.partitions)])
    delays, stamped = [], []
    try:
        while not monitor.folds:
            time.sleep(0.05)
        load.start()
        load_started = time.monotonic()
        starter = threading.Thread(target=start_runs, args=(settings,), daemon=True)
        starter.start()  # the tail below reads while runs start, so a read time is the time it was readable
        deadline = time.monotonic() + 30
        while len(delays) < DEADLINE_RUNS and time.monotonic() < deadline:
            for record in tail.poll(0.05):
                if isinstance(record.event, DeadlineMissed):
                    delays.append(time.time() - record.event.deadline)
                    stamped.append(record.timestamp - record.event.deadline)
        starter.join(10)
        load_rate = written[0] / (time.monotonic() - load_started)
    finally:
        stop.set()
        load.join(10)
        monitor.stop()
        thread.join(30)
        tail.close()
    figure("background load (synthetic events)", load_rate, "events/s", "~1,000")
    figure(f"DeadlineMissed written ({len(delays)} of {DEADLINE_RUNS} runs)", len(delays), "runs")
    if delays:
        figure("deadline -> DeadlineMissed readable by a consumer, median", statistics.median(delays), "s",
               "<= 1 s")
        figure("deadline -> DeadlineMissed readable by a consumer, max", max(delays), "s", "<= 1 s")
        figure("deadline -> DeadlineMissed record timestamp, median", statistics.median(stamped), "s")
        print(f"  readable delays: {spread(delays)}", flush=True)


def main() -> None:
    bench_core_fold()
    with tempfile.TemporaryDirectory(prefix="bench-monitor-") as tmp:
        bench_replay(Path(tmp))
        bench_live(Path(tmp))
        bench_deadline_delay(Path(tmp))


if __name__ == "__main__":
    main()
