"""Serving a service's Prometheus metrics over HTTP (the adapter; metrics are declared by each service).

Each service declares its metrics on a private :class:`CollectorRegistry` (several services in
one test process never collide) and its shell records into them; the cores never see them.
A port of 0 or unset serves nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger("tock.metrics")


class MetricsServerError(RuntimeError):
    """The metrics port could not be bound."""


@dataclass
class MetricsServer:
    """A running /metrics endpoint; ``close()`` stops it."""

    service: str
    host: str
    port: int
    _server: object

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"


def serve_metrics(service: str, registry: CollectorRegistry, host: str, port: int | None) -> MetricsServer | None:
    """Serve ``registry`` at http://host:port/metrics in a daemon thread; None when ``port`` is 0 or unset."""
    if not port:
        return None
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise MetricsServerError(f"{service}: cannot serve metrics on {host}:{port} ({error}); "
                                 f"choose another port or set it to 0") from None
    served = MetricsServer(service, host, port, server)
    log.info("%s metrics served at %s", service, served.url)
    return served
