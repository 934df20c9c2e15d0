"""Cron arithmetic shared by the SDK, the scheduler core and the API: the only place that calls croniter.

Times are seconds since the epoch, schedules are read in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter

ONCE = "@once"


def _cron(schedule: str, start: float) -> croniter:
    return croniter(schedule, datetime.fromtimestamp(start, tz=UTC))


def next_fire_time(schedule: str, after: float) -> float:
    """The first fire time strictly after ``after``."""
    return float(_cron(schedule, after).get_next(float))


def latest_fire_time(schedule: str, until: float) -> float:
    """The last fire time at or before ``until``."""
    cron = _cron(schedule, until + 1e-6)
    return float(cron.get_prev(float))
