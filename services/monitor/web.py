"""The monitor's tables as JSON over HTTP (a small stdlib server on a thread beside the loop).

``GET /stats``: the windowed statistics of the partitions this instance owns (optional
``?measure=NAME``), ``GET /deadlines``: open runs and task instances with a deadline, the runs
and task instances that missed one and the callbacks owed a call, ``GET /health``: the
partitions owned, ``GET /metrics``: its Prometheus metrics. With several monitors, each serves its own
partitions' DAGs (queue latency is per partition too: ask each).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.monitor.core import merged, open_task_deadlines, run_deadline, table
from services.monitor.metrics import monitor_registry
from services.monitor.shell import Monitor

log = logging.getLogger("tock.monitor")


def stats_view(monitor: Monitor, measure: str | None = None) -> dict:
    with monitor.lock:
        folds = list(monitor.folds.values())
        cells = merged([fold.state.stats for fold in folds])
        specs = folds[0].state.stats.specs if folds else ()
        partitions = sorted(monitor.folds)
    sizes = {spec.name: spec.size for spec in specs}
    rows = [row for row in table(cells, sizes) if measure is None or row["measure"] == measure]
    return {"monitor_id": monitor.monitor_id, "partitions": partitions,
            "windows": {spec.name: {"size": spec.size, "step": spec.step} for spec in specs}, "rows": rows}


def deadlines_view(monitor: Monitor) -> dict:
    with monitor.lock:
        open_runs = [{"dag_id": dag_id, "run_id": run_id, "started_at": clock.started_at,
                      "deadline": run_deadline(fold.state, dag_id, clock), "missed": clock.missed}
                     for fold in monitor.folds.values() for (dag_id, run_id), clock in fold.state.runs.items()
                     if dag_id in fold.state.deadlines]
        missed = sorted([dag_id, run_id] for fold in monitor.folds.values() for dag_id, run_id in fold.state.missed)
        open_tasks = [{"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "deadline": deadline}
                      for fold in monitor.folds.values()
                      for (dag_id, run_id, task_id), deadline in open_task_deadlines(fold.state)]
        tasks_missed = sorted(list(key) for fold in monitor.folds.values() for key in fold.state.tasks_missed)
        owed = sorted(list(key) for fold in monitor.folds.values() for key in fold.state.notifications.owed)
    return {"monitor_id": monitor.monitor_id, "open": sorted(open_runs, key=lambda run: run["deadline"]),
            "missed": missed, "open_tasks": sorted(open_tasks, key=lambda task: task["deadline"]),
            "tasks_missed": tasks_missed, "written_by_this_instance": monitor.fired, "callbacks_owed": owed}


class _Handler(BaseHTTPRequestHandler):
    monitor: Monitor  # set on the subclass made per server
    registry: object  # its Prometheus registry

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/stats":
            body = stats_view(self.monitor, (query.get("measure") or [None])[0])
        elif url.path == "/deadlines":
            body = deadlines_view(self.monitor)
        elif url.path == "/metrics":
            self._send_bytes(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
            return
        elif url.path == "/health":
            with self.monitor.lock:
                body = {"monitor_id": self.monitor.monitor_id, "partitions": sorted(self.monitor.folds)}
        else:
            self._send(404, {"error": f"no such table {url.path}; try /stats, /deadlines, /health or /metrics"})
            return
        self._send(200, body)

    def _send(self, status: int, body: dict) -> None:
        self._send_bytes(status, json.dumps(body).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        log.debug("http: " + format, *args)


class MonitorServer:
    """Serves a monitor's tables on host:port until closed."""

    def __init__(self, monitor: Monitor, host: str, port: int) -> None:
        handler = type("MonitorHandler", (_Handler,), {"monitor": monitor, "registry": monitor_registry(monitor)})
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="monitor-http", daemon=True)

    def start(self) -> None:
        self.thread.start()
        log.info("monitor tables on http://%s:%d/stats", *self.server.server_address[:2])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
