"""Projection benchmarks: throughput (SQLite, PostgreSQL), lag under a 200-task fan-out, rebuild time.

Run: .venv/bin/python -m tests.benchmarks.bench_projections
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
from sqlalchemy import select

from infra.log import KafkaEventLog
from projections.db import create_tables, open_engine
from projections.projector import BatchLimits, Projector
from projections.rebuild import rebuild
from projections.tables import LIVE
from tests.benchmarks.common import REPO, bench_settings, figure, infra_home
from tests.unit.projection_logs import lifecycle

THROUGHPUT_EVENTS = 200_000
FAN_OUT = 200


def _postgres_url() -> str:
    result = subprocess.run(["bash", str(REPO / "infra/scripts/postgres.sh"), "start"], capture_output=True,
                            text=True, check=True, env={**os.environ, "STATE_DIR": str(infra_home())})
    return result.stdout.strip().splitlines()[-1].replace("postgresql://", "postgresql+psycopg://", 1)


class PostgresSchema:
    """A scratch schema for one measurement, dropped afterwards."""

    def __init__(self) -> None:
        self.base = _postgres_url()
        self.name = f"bench_{uuid.uuid4().hex[:8]}"

    def __enter__(self) -> str:
        self._execute(f'CREATE SCHEMA "{self.name}"')
        return f"{self.base}?options={quote(f'-csearch_path={self.name}')}"

    def __exit__(self, *_exc) -> None:
        self._execute(f'DROP SCHEMA "{self.name}" CASCADE')

    def _execute(self, sql: str) -> None:
        with psycopg.connect(self.base.replace("+psycopg", ""), autocommit=True) as connection:
            connection.execute(sql)


def _lifecycle_log(count: int) -> list:
    events, index = [], 0
    while len(events) < count:
        events += lifecycle(f"dag{index % 50}", f"run{index // 20}", f"task{index % 20}", 1, 1.7e9 + index)
        index += 1
    return events[:count]


def _produce(settings, events) -> None:
    with KafkaEventLog(settings, client_id="bench") as log:
        for event in events:
            log.append(event)


def _project_until(settings, engine, total: int, limits: BatchLimits) -> float:
    """Seconds for a fresh projector to apply ``total`` records."""
    stop = threading.Event()
    projector = Projector(settings, engine, stop, limits=limits)
    thread = threading.Thread(target=projector.run, daemon=True)
    started = time.perf_counter()
    thread.start()
    while projector.applied < total:
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join(30)
    return elapsed


def throughput(tmp: Path, events: list, db_url: str, name: str, goal: str = "") -> None:
    settings = bench_settings(tmp / name, db_url=db_url)
    _produce(settings, events)
    engine = open_engine(settings)
    create_tables(engine)
    seconds = _project_until(settings, engine, len(events), BatchLimits(records=20_000, linger=0.1))
    figure(f"projection throughput, {name} ({len(events):,} events)", len(events) / seconds, "events/s", goal)
    if name == "postgresql":
        started = time.perf_counter()
        rebuild(settings, engine)
        seconds = time.perf_counter() - started
        figure(f"rebuild of {len(events):,} events, postgresql", seconds, "s")
        figure("rebuild of 1,000,000 events, postgresql (extrapolated x"
               f"{1_000_000 / len(events):.0f} from the line above)", seconds * 1_000_000 / len(events), "s")
    engine.dispose()


def lag(tmp: Path, db_url: str) -> None:
    """Append the lifecycle of a 200-task fan-out wave by wave; time until each event's history row shows."""
    settings = bench_settings(tmp / "lag", db_url=db_url)
    engine = open_engine(settings)
    create_tables(engine)
    stop = threading.Event()
    projector = Projector(settings, engine, stop, limits=BatchLimits(records=5000, linger=0.005, idle_poll=0.05))
    threading.Thread(target=projector.run, daemon=True).start()
    time.sleep(2)  # let the reader connect before the clock starts
    appended: dict[tuple[str, str], float] = {}
    seen: dict[tuple[str, str], float] = {}
    watcher = threading.Thread(target=_watch, args=(engine, seen, FAN_OUT * 4, stop), daemon=True)
    watcher.start()
    waves = list(zip(*[lifecycle("fanout", "run1", f"task{i}", 1, 1.7e9) for i in range(FAN_OUT)]))
    with KafkaEventLog(settings, client_id="bench-lag") as log:
        for wave in waves:
            for event in wave:
                if event.TOPIC == "events":
                    appended[(event.task_id, type(event).__name__)] = time.perf_counter()
                log.append(event)
            log.flush()
            time.sleep(0.2)
    watcher.join(60)
    stop.set()
    lags = sorted((seen[key] - at) * 1000 for key, at in appended.items() if key in seen)
    figure(f"lag append->row visible, p50 ({len(lags)} events, {FAN_OUT}-task fan-out)",
           statistics.median(lags), "ms")
    figure("lag append->row visible, p99", lags[int(len(lags) * 0.99) - 1], "ms", "<= 500 ms")
    engine.dispose()


def _watch(engine, seen: dict, expected: int, stop: threading.Event) -> None:
    table = LIVE["task_event"]
    deadline = time.monotonic() + 60
    while len(seen) < expected and time.monotonic() < deadline and not stop.is_set():
        with engine.connect() as connection:
            rows = connection.execute(select(table.c.task_id, table.c.event_type)).all()
        now = time.perf_counter()
        for row in rows:
            seen.setdefault((row.task_id, row.event_type), now)
        time.sleep(0.005)


def main() -> None:
    events = _lifecycle_log(THROUGHPUT_EVENTS)
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        throughput(tmp, events[:100_000], f"sqlite:///{tmp / 'bench.db'}", "sqlite")
        with PostgresSchema() as url:
            throughput(tmp, events, url, "postgresql", goal=">= 20,000 events/s")
        with PostgresSchema() as url:
            lag(tmp, url)


if __name__ == "__main__":
    main()
