"""Executor workers' liveness (topic ``tock.schedulers``, keyed by ``worker/<worker name>``).

A Celery worker (or any executor's worker process) says every few seconds that it is alive,
which executor and queues it serves and how many tries it runs at once. The counts of
running tries come from the tries' own events, never from here.
"""

from __future__ import annotations

from dataclasses import field

from schemas.declare import SCHEDULERS, EventBase, event
from schemas.routing import BY_WORKER


@event(SCHEDULERS, route=BY_WORKER)
class WorkerHeartbeat(EventBase):
    """A worker of ``executor`` is alive, consuming ``queues``, running up to ``concurrency`` tries."""

    worker: str
    executor: str
    hostname: str
    pid: int
    queues: list[str] = field(default_factory=list)
    concurrency: int
    at: float


@event(SCHEDULERS, route=BY_WORKER)
class WorkerStopped(EventBase):
    """A worker shut down cleanly."""

    worker: str
    executor: str
    at: float
