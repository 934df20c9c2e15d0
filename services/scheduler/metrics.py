"""The scheduler's Prometheus metrics: declared here, recorded by the shell, never by the core.

Tries queued and running per executor are read from the fold twice a second (a gauge that
follows the log, so it returns to 0 when the runs end), not counted up and down by the shell.
Runner heartbeat delay is measured here too, from the gaps between a try's heartbeats in the
log: runners are many short-lived processes (one per try, per Celery pool process, per pod)
that no Prometheus could scrape, while the partition's owner reads every heartbeat anyway.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.scheduler.core import SchedulerState

QUEUED, RUNNING = "queued", "running"
FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SLOW = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
FOLD_EVERY = 0.5  # seconds between readings of the fold: a walk over every active try, kept off most turns
LATE = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def tries_by_executor(states: Iterable[SchedulerState], executors: Iterable[str]) -> dict[tuple[str, str], int]:
    """(executor, queued|running) -> tries, from the fold; every named executor is listed, at 0 if idle.

    Queued: decided, no handle yet. Running: with a handle or started."""
    counts = {(executor, kind): 0 for executor in executors for kind in (QUEUED, RUNNING)}
    for state in states:
        for kind, keys in ((QUEUED, state.unlaunched), (RUNNING, state.live)):
            for key in keys:
                instance = state.instance(key)
                if instance is not None:
                    counts[(instance.executor, kind)] = counts.get((instance.executor, kind), 0) + 1
    return counts


def heartbeat_delay(previous: float | None, at: float, interval: float) -> float | None:
    """How late a heartbeat at ``at`` came after the previous one (or the start), beyond ``interval``.

    None when there is nothing to compare (no previous time, or not later than it)."""
    if previous is None or at <= previous:
        return None
    return max(0.0, at - previous - interval)


class SchedulerMetrics:
    """One registry per scheduler instance (tests run several in one process)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.tries = Gauge("tock_scheduler_tries", "tries of the owned partitions by executor and state "
                           "(queued: no handle yet; running: launched or started), from the fold",
                           ["executor", "state"], registry=registry)
        self.partitions = Gauge("tock_scheduler_partitions_owned", "partitions this instance owns",
                                registry=registry)
        self.decisions = Counter("tock_scheduler_decisions", "decided events committed, by event type",
                                 ["event"], registry=registry)
        self.dead_tries = Counter("tock_scheduler_dead_tries", "tries declared dead (TaskDeclaredDead committed)",
                                  registry=registry)
        self.commit_seconds = Histogram("tock_scheduler_commit_seconds", "time to commit one transaction of "
                                        "decisions and offsets", buckets=FAST, registry=registry)
        self.aborted = Counter("tock_scheduler_commits_aborted", "transactions aborted (decided again)",
                               registry=registry)
        self.replay_seconds = Histogram("tock_scheduler_replay_seconds", "time to replay partitions taken over",
                                        buckets=SLOW, registry=registry)
        self.takeover_seconds = Histogram("tock_scheduler_takeover_seconds", "time from being assigned "
                                          "partitions to reading on (waiting out open transactions, replay)",
                                          buckets=SLOW, registry=registry)
        self.takeover_from_snapshot = Counter("tock_scheduler_takeover_from_snapshot", "partitions taken over "
                                              "from a snapshot and the log after it (not a full replay)",
                                              registry=registry)
        self.snapshot_seconds = Histogram("tock_scheduler_snapshot_seconds", "CPU seconds to encode one "
                                          "partition's snapshot (on the decision thread)", buckets=SLOW,
                                          registry=registry)
        self.snapshot_bytes = Histogram("tock_scheduler_snapshot_bytes", "size of one partition's snapshot",
                                        buckets=(1e4, 1e5, 1e6, 4e6, 16e6, 64e6), registry=registry)
        self.heartbeat_delay = Histogram("tock_runner_heartbeat_delay_seconds", "how late each runner "
                                         "heartbeat came after the previous one, beyond "
                                         "TOCK_TASK_HEARTBEAT_SECONDS (read from the log)",
                                         buckets=LATE, registry=registry)
        self._seen: set[str] = set()
        self._next_fold = 0.0

    def follow_fold(self, states: list[SchedulerState], executors: Iterable[str]) -> None:
        """Set the gauges that mirror the owned partitions' fold (at most every FOLD_EVERY seconds)."""
        now = time.monotonic()
        if now < self._next_fold:
            return
        self._next_fold = now + FOLD_EVERY
        self.partitions.set(len(states))
        counts = tries_by_executor(states, {*executors, *self._seen})  # a label once shown goes back to 0
        for (executor, state), count in counts.items():
            self.tries.labels(executor, state).set(count)
        self._seen.update(executor for executor, _state in counts)

    def committed(self, events: Iterable[object]) -> None:
        for event in events:
            name = type(event).__name__
            self.decisions.labels(name).inc()
            if name == "TaskDeclaredDead":
                self.dead_tries.inc()
