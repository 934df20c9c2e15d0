"""Starting the Celery worker process of ``tock worker``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from infra.settings import Settings
from services.worker.tasks import worker_app

log = logging.getLogger("tock.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    queues: tuple[str, ...]
    concurrency: int


def run_worker(settings: Settings, options: WorkerOptions) -> int:
    """Run the worker until it is shut down; its exit code."""
    app = worker_app(settings)
    node = f"tock@{settings.host}"
    log.info("worker %s: queues %s, concurrency %d, broker %s", node, ",".join(options.queues),
             options.concurrency, settings.celery_broker_url)
    worker = app.Worker(hostname=node, queues=list(options.queues), concurrency=options.concurrency,
                        pool="prefork", loglevel=settings.log_level, without_mingle=True, without_gossip=True,
                        optimization="fair")
    worker.start()
    return worker.exitcode or 0
