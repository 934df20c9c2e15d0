"""The projector's Prometheus metrics, recorded by its loop (``projections.projector``).

Lag is what the log holds that the tables do not yet: per topic, the sum over its partitions
of the end offset (the last stable offset, for a read_committed reader) minus the reader's
position (past transaction markers; the tables reflect it once the batch commits). The ends are
the reader's cached watermarks: no broker round trip.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from projections.records import logical_topic

Positions = Mapping[tuple[str, int], int]
BATCH_BUCKETS = (1, 10, 100, 1_000, 5_000, 10_000, 20_000, 50_000, 100_000)
APPLY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def lag_by_topic(positions: Positions, ends: Positions) -> dict[str, int]:
    """Logical topic -> records behind, over the partitions whose end is known (end >= 0)."""
    lag: dict[str, int] = {}
    for (topic, partition), end in ends.items():
        if end >= 0:
            behind = max(0, end - positions.get((topic, partition), 0))
            lag[logical_topic(topic)] = lag.get(logical_topic(topic), 0) + behind
    return lag


class ProjectorMetrics:
    """One registry per projector."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.lag = Gauge("tock_projector_lag_records", "records in the log not yet in the tables, by topic",
                         ["topic"], registry=registry)
        self.batch_records = Histogram("tock_projector_batch_records", "records per committed batch",
                                       buckets=BATCH_BUCKETS, registry=registry)
        self.apply_seconds = Histogram("tock_projector_apply_seconds", "time to fold and commit one batch "
                                       "(rows and offsets in one transaction)", buckets=APPLY_BUCKETS,
                                       registry=registry)
        self.applied = Counter("tock_projector_records_applied", "records applied to the tables",
                               registry=registry)

    def batch(self, records: int, applied: int, seconds: float) -> None:
        self.batch_records.observe(records)
        self.apply_seconds.observe(seconds)
        self.applied.inc(applied)

    def follow_lag(self, positions: Positions, ends: Positions) -> None:
        for topic, behind in lag_by_topic(positions, ends).items():
            self.lag.labels(topic).set(behind)
