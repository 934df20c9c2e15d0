"""Codec encode/decode rate on one core, and the local broker's cold start to ready."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import schemas
from infra.broker import LocalKafkaBroker
from infra.settings import load_settings
from tests.benchmarks.common import figure

COUNT = 200_000


def sample_events() -> list:
    now = time.time()
    key = {"dag_id": "etl_hourly", "run_id": "scheduled__2026-11-30T02:00:00", "task_id": "extract_orders"}
    return [
        schemas.TaskQueued(**key, try_number=1, executor="local", queue="default", scheduler_id="sched-a", at=now),
        schemas.TaskHeartbeat(**key, try_number=1, runner_id="r-8d1f", at=now),
        schemas.TaskSucceeded(**key, try_number=1, runner_id="r-8d1f", at=now),
        schemas.DagRunCreated(dag_id="etl_hourly", run_id=key["run_id"], logical_date=now, run_type="scheduled",
                              dag_fingerprint="9f2c41", scheduler_id="sched-a", at=now),
    ]


def bench_codec() -> None:
    events = sample_events() * (COUNT // 4)
    started = time.perf_counter()
    values = [schemas.encode(event) for event in events]
    encode_rate = len(events) / (time.perf_counter() - started)
    started = time.perf_counter()
    for value in values:
        schemas.decode(value)
    decode_rate = len(values) / (time.perf_counter() - started)
    average = sum(map(len, values)) / len(values)
    figure(f"codec encode, mixed task events ({average:.0f} B avg)", encode_rate, "events/s", ">= 200,000")
    figure("codec decode, mixed task events", decode_rate, "events/s", ">= 200,000")


def bench_broker_start() -> None:
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"TOCK_HOME": home, "TOCK_BROKER_PORT": "19192", "TOCK_CONTROLLER_PORT": "19193"})
        broker = LocalKafkaBroker(settings)
        broker.fetch_jars()
        try:
            started = time.perf_counter()
            broker.start()
            figure("broker cold start to ready (fresh data dir, incl. format)", time.perf_counter() - started, "s")
            broker.stop()
            started = time.perf_counter()
            broker.start()
            figure("broker restart to ready (existing data dir)", time.perf_counter() - started, "s")
        finally:
            broker.stop()
            assert not Path(home, "broker", "broker.pid").exists()


if __name__ == "__main__":
    bench_codec()
    bench_broker_start()
