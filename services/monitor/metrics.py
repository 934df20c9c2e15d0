"""Prometheus metrics of the monitor, read from it at scrape time (no state of their own)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from services.monitor.shell import Monitor


class MonitorCollector:
    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor

    def collect(self):
        monitor = self._monitor
        with monitor.lock:
            folds = list(monitor.folds.values())
            owned = len(folds)
            folded = sum(fold.state.events_folded for fold in folds)
            open_runs = sum(1 for fold in folds for (dag_id, _run) in fold.state.runs if dag_id in fold.state.deadlines)
            cells = sum(len(fold.state.stats.cells) for fold in folds)
            owed = sum(len(fold.state.notifications.owed) for fold in folds)
        yield _gauge("tock_monitor_partitions_owned", "partitions of tock.events this monitor owns", owned)
        yield _gauge("tock_monitor_events_folded", "events folded for the partitions owned (since assigned)", folded)
        yield _gauge("tock_monitor_open_runs_with_deadline", "open runs whose DAG declares a deadline", open_runs)
        yield _gauge("tock_monitor_window_cells", "windowed aggregates held (measure x key x window)", cells)
        yield _gauge("tock_monitor_callbacks_owed", "callback calls owed (not yet settled in the log)", owed)
        misses = CounterMetricFamily("tock_monitor_deadline_misses_written",
                                     "DeadlineMissed and TaskDeadlineMissed committed by this monitor")
        misses.add_metric([], monitor.fired)
        yield misses
        calls = CounterMetricFamily("tock_monitor_callbacks_called", "callback call sequences committed, by outcome",
                                    labels=["outcome"])
        for outcome, count in sorted(monitor.callbacks_called.items()):
            calls.add_metric([outcome], count)
        yield calls
        yield from _takeover_metrics(monitor)


def _takeover_metrics(monitor: Monitor):
    counts = monitor.taken_over
    taken = CounterMetricFamily("tock_monitor_takeovers", "partitions taken over, from their snapshot or from the "
                                "start of the log", labels=["origin"])
    taken.add_metric(["snapshot"], counts.from_snapshot)
    taken.add_metric(["start"], counts.from_start)
    yield taken
    replayed = CounterMetricFamily("tock_monitor_takeover_records_replayed",
                                   "records replayed by takeovers (those after the snapshots restored)")
    replayed.add_metric([], counts.records_replayed)
    yield replayed


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def monitor_registry(monitor: Monitor) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(MonitorCollector(monitor))
    return registry
