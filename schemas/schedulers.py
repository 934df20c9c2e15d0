"""Scheduler liveness (topic ``tock.schedulers``, keyed by scheduler id)."""

from __future__ import annotations

from dataclasses import field

from schemas.declare import SCHEDULERS, EventBase, event
from schemas.routing import BY_SCHEDULER


@event(SCHEDULERS, route=BY_SCHEDULER)
class SchedulerHeartbeat(EventBase):
    """A scheduler instance is alive and owns these partitions."""

    scheduler_id: str
    hostname: str
    pid: int
    partitions: list[int] = field(default_factory=list)
    at: float


@event(SCHEDULERS, route=BY_SCHEDULER)
class SchedulerStopped(EventBase):
    """A scheduler instance shut down cleanly."""

    scheduler_id: str
    at: float
