"""Prometheus metrics of the API: requests, and how far the tables reflect the log."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import Engine

from projections import queries


class ProjectionCollector:
    """Reads the projected offsets at scrape time (no state of its own)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self):
        offsets = GaugeMetricFamily("tock_projection_next_offset", "next log offset the tables reflect",
                                    labels=["topic", "partition"])
        try:
            rows = queries.projected_offsets(self._engine)
        except Exception:  # noqa: BLE001 - a scrape during a DB outage reports no offsets
            rows = []
        for row in rows:
            offsets.add_metric([row["topic"], str(row["partition"])], row["next_offset"])
        yield offsets


class ApiMetrics:
    """One registry per app, so several apps (tests) never collide."""

    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("tock_api_requests", "HTTP requests served", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("tock_api_request_seconds", "HTTP request latency", ["method", "route"],
                                 registry=self.registry)
        self.commands = Counter("tock_api_commands", "commands appended to the log", ["command"],
                                registry=self.registry)
        self.registry.register(ProjectionCollector(engine))
