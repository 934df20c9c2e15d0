"""Shared set-up for benchmarks: real services, a fresh topic prefix, figures printed uniformly."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient

from infra.broker import LocalKafkaBroker
from infra.log import KafkaEventLog
from infra.settings import Settings, load_settings
from infra.topics import ensure_topics
from schemas import TriggerDagRun
from services.scheduler.core import manual_run_id

REPO = Path(__file__).resolve().parents[2]


def infra_home() -> Path:
    return Path(os.environ.get("TOCK_HOME", REPO / ".tock"))


def bench_settings(tmp: Path, partitions: int = 12, *, bootstrap: str | None = None, **overrides: str) -> Settings:
    """Settings on the local broker (or on ``bootstrap``) with a fresh topic prefix whose topics exist."""
    address = bootstrap or os.environ.get("TOCK_KAFKA_BOOTSTRAP")
    if address is None:
        address = LocalKafkaBroker(load_settings({"TOCK_HOME": str(infra_home())})).start().address
    values = {
        "TOCK_HOME": str(tmp),
        "TOCK_KAFKA_BOOTSTRAP": address,
        "TOCK_TOPIC_PREFIX": f"bench{uuid.uuid4().hex[:8]}.",
        "TOCK_PARTITIONS": str(partitions),
    }
    values.update({f"TOCK_{key.upper()}": str(value) for key, value in overrides.items()})
    settings = load_settings(values)
    ensure_topics(AdminClient({"bootstrap.servers": address}), settings.topic_prefix, settings.partitions)
    return settings


def figure(name: str, value: float, unit: str, goal: str = "") -> None:
    """Print one measured figure in the common format."""
    suffix = f"   (goal: {goal})" if goal else ""
    print(f"  {name:<58} {value:>14,.3f} {unit}{suffix}", flush=True)


def spread(values: list[float]) -> str:
    return f"min {min(values):.3f} / median {statistics.median(values):.3f} / max {max(values):.3f}"


class RunFailed(RuntimeError):
    """A benchmark run did not succeed: the script exits non-zero."""


def timed_run(settings: Settings, tail, dag_id: str) -> tuple[float, str]:
    """Seconds from the TriggerDagRun's acknowledgement to the run's success (read from the log by
    ``tail``, a scenarios LogTail), and the run id."""
    request_id = uuid.uuid4().hex
    with KafkaEventLog(settings, client_id="bench-trigger") as event_log:
        event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="bench", at=time.time()))
        event_log.flush()
        acknowledged = time.time()
    finished = tail.run_finished(manual_run_id(request_id), 300)
    if finished.state != "success":
        raise RunFailed(f"run {finished.run_id} of {dag_id} ended {finished.state}")
    return finished.at - acknowledged, manual_run_id(request_id)


def children_cpu(pid: int, into: dict[int, float]) -> None:
    """Record the own CPU seconds (user + system) of every descendant of ``pid`` alive now, per pid:
    processes exit, so what they spend after their last sample is lost (a lower bound). Not their
    ``children_*`` times: a reaped child sampled alive would count twice."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for child in children:
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        into[child.pid] = times.user + times.system
