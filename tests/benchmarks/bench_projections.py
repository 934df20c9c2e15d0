"""Projection benchmarks: throughput (SQLite, PostgreSQL), lag under a 200-task fan-out, rebuild time.

Run: .venv/bin/python -m tests.benchmarks.bench_projections

Throughput: a fresh projector (production batch limits) applies a log produced beforehand.
Lag: the time from appending an event to its rows being committed, seen by a watcher that
polls the (tiny) offsets table every 10 ms; rows and offsets commit in one transaction,
so an offset visible there means the event's rows are visible. Rebuild: the whole log
from offset 0 into fresh tables, swapped in.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import tempfile
import threading
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sqlalchemy import select

from infra.log import KafkaEventLog
from projections.db import create_tables, open_engine
from projections.projector import Projector
from projections.rebuild import rebuild
from projections.tables import LIVE, OFFSETS
from tests.benchmarks.common import REPO, bench_settings, figure, infra_home
from tests.integration.projection_db import postgres_schema_url
from tests.unit.projection_logs import LogBuilder, lifecycle

THROUGHPUT_EVENTS = 200_000
REBUILD_EVENTS = 1_000_000
REBUILD_BUDGET = 240.0  # seconds a direct rebuild measurement may take
FAN_OUT, FAN_OUT_RUNS = 200, 3
WATCH_EVERY = 0.01


def _postgres_url() -> str:
    result = subprocess.run(["bash", str(REPO / "infra/scripts/postgres.sh"), "start"], capture_output=True,
                            text=True, check=True, env={**os.environ, "STATE_DIR": str(infra_home())})
    return result.stdout.strip().splitlines()[-1].replace("postgresql://", "postgresql+psycopg://", 1)


def postgres_schema() -> AbstractContextManager[str]:
    """A scratch schema for one measurement (its URL), dropped afterwards."""
    return contextmanager(postgres_schema_url)(_postgres_url())


def _lifecycle_log(count: int):
    """``count`` task events: tries of 20 tasks per run, 50 DAGs (a generator: 1M events stay cheap)."""
    tries = (lifecycle(f"dag{i % 50}", f"run{i // 20}", f"task{i % 20}", 1, 1.7e9 + i) for i in itertools.count())
    return itertools.islice(itertools.chain.from_iterable(tries), count)


def _produce(settings, events) -> int:
    produced = 0
    with KafkaEventLog(settings, client_id="bench") as log:
        for event in events:
            log.append(event)
            produced += 1
    return produced


def _project_until(settings, engine, total: int) -> float:
    """Seconds for a fresh projector (production batch limits) to apply ``total`` records."""
    stop = threading.Event()
    projector = Projector(settings, engine, stop)
    thread = threading.Thread(target=projector.run, daemon=True)
    started = time.perf_counter()
    thread.start()
    while projector.applied < total:
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join(30)
    return elapsed


def throughput(tmp: Path, count: int, db_url: str, name: str, goal: str = "") -> float | None:
    """Projection events/s; on PostgreSQL also a rebuild of the same log, whose seconds it returns."""
    settings = bench_settings(tmp / name, db_url=db_url)
    _produce(settings, _lifecycle_log(count))
    engine = open_engine(settings)
    create_tables(engine)
    seconds = _project_until(settings, engine, count)
    figure(f"projection throughput, {name} ({count:,} events)", count / seconds, "events/s", goal)
    rebuilt = None
    if name == "postgresql":
        rebuilt = _timed_rebuild(settings, engine)
        figure(f"rebuild of {count:,} events, postgresql", rebuilt, "s")
    engine.dispose()
    return rebuilt


def _timed_rebuild(settings, engine) -> float:
    started = time.perf_counter()
    rebuild(settings, engine)
    return time.perf_counter() - started


def rebuild_large(tmp: Path, db_url: str, seconds_per_event: float) -> None:
    """Rebuild 1M events directly if the estimate fits the budget, else the most that fits, extrapolated."""
    count = REBUILD_EVENTS
    if seconds_per_event * count > REBUILD_BUDGET:
        count = int(REBUILD_BUDGET / seconds_per_event) // 10_000 * 10_000
    settings = bench_settings(tmp / "rebuild", db_url=db_url)
    started = time.perf_counter()
    _produce(settings, _lifecycle_log(count))
    figure(f"(producing {count:,} events for the rebuild)", time.perf_counter() - started, "s")
    engine = open_engine(settings)
    seconds = _timed_rebuild(settings, engine)
    engine.dispose()
    figure(f"rebuild of {count:,} events, postgresql (measured)", seconds, "s")
    if count < REBUILD_EVENTS:
        figure(f"rebuild of {REBUILD_EVENTS:,} events, postgresql (EXTRAPOLATED x{REBUILD_EVENTS / count:.1f})",
               seconds * REBUILD_EVENTS / count, "s")


class OffsetWatcher:
    """Notes when each log position becomes visible in the offsets table (polled every 10 ms)."""

    def __init__(self, engine) -> None:
        self._engine, self._stop = engine, threading.Event()
        self.visible_at: dict[tuple[str, int, int], float] = {}
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> OffsetWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def wait_for(self, position: tuple[str, int, int], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while position not in self.visible_at:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{position} not projected within {timeout} s")
            time.sleep(WATCH_EVERY)

    def _watch(self) -> None:
        table = LIVE[OFFSETS]
        query = select(table.c.topic, table.c.partition, table.c.next_offset)
        upto: dict[tuple[str, int], int] = {}
        with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            while not self._stop.wait(WATCH_EVERY):
                rows = connection.execute(query).all()
                now = time.perf_counter()
                for topic, partition, next_offset in rows:
                    for offset in range(upto.get((topic, partition), 0), next_offset):
                        self.visible_at[(topic, partition, offset)] = now
                    upto[(topic, partition)] = max(next_offset, upto.get((topic, partition), 0))


def lag(tmp: Path, db_url: str) -> None:
    """Append 200-task fan-outs wave by wave (every task queued, then launched, ...); time each event."""
    settings = bench_settings(tmp / "lag", db_url=db_url)
    engine = open_engine(settings)
    create_tables(engine)
    stop = threading.Event()
    threading.Thread(target=Projector(settings, engine, stop).run, daemon=True).start()
    positions = LogBuilder(settings.partitions, settings.topic_prefix)
    appended: dict[tuple[str, int, int], float] = {}
    with OffsetWatcher(engine) as watcher, KafkaEventLog(settings, client_id="bench-lag") as log:
        warm_up = lifecycle("warm-up", "run0", "task0", 1, 1.7e9)[0]
        log.append(warm_up)
        log.flush()
        record = positions.add(warm_up)
        watcher.wait_for((record.topic, record.partition, record.offset))  # the reader is connected
        for run in range(FAN_OUT_RUNS):
            lifecycles = [lifecycle("fanout", f"run{run}", f"task{i}", 1, 1.7e9) for i in range(FAN_OUT)]
            for wave in zip(*lifecycles, strict=False):
                for event in wave:
                    record = positions.add(event)
                    appended[(record.topic, record.partition, record.offset)] = time.perf_counter()
                    log.append(event)
                log.flush()
                time.sleep(0.2)
        for position in appended:
            watcher.wait_for(position)
    stop.set()
    lags = sorted((watcher.visible_at[position] - at) * 1000 for position, at in appended.items())
    figure(f"lag append->row visible, p50 ({len(lags)} events, {FAN_OUT}-task fan-out x{FAN_OUT_RUNS})",
           statistics.median(lags), "ms")
    figure("lag append->row visible, p99", lags[int(len(lags) * 0.99) - 1], "ms", "<= 500 ms")
    figure("lag append->row visible, max", lags[-1], "ms")
    engine.dispose()


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        throughput(tmp, 100_000, f"sqlite:///{tmp / 'bench.db'}", "sqlite")
        with postgres_schema() as url:
            rebuilt = throughput(tmp, THROUGHPUT_EVENTS, url, "postgresql", goal=">= 20,000 events/s")
        with postgres_schema() as url:
            lag(tmp, url)
        with postgres_schema() as url:
            rebuild_large(tmp, url, rebuilt / THROUGHPUT_EVENTS)


if __name__ == "__main__":
    main()
