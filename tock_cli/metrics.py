"""Serving a service's metrics for the life of its command (see ``infra.metrics``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from prometheus_client import CollectorRegistry

from infra.metrics import MetricsServerError, serve_metrics
from infra.settings import Settings


@contextmanager
def metrics_served(service: str, registry: CollectorRegistry, settings: Settings, port: int) -> Iterator[None]:
    """Serve ``registry`` on ``port`` (0: not at all) while the block runs; a port taken exits 2."""
    try:
        server = serve_metrics(service, registry, settings.metrics_host, port)
    except MetricsServerError as error:
        typer.echo(f"tock {service}: {error}", err=True)
        raise typer.Exit(2) from None
    try:
        yield
    finally:
        if server is not None:
            server.close()
