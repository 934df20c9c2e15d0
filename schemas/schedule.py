"""Cron arithmetic shared by the SDK, the scheduler core and the API: the only place that calls croniter.

Times are seconds since the epoch, schedules are read in UTC. Nothing here raises for a schedule
or a time it is given: a fire time that does not exist (the schedule never fires again, or the
answer falls outside the calendar of years 1-9999) is ``None``, and callers read it as "no run".
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from croniter import croniter

ONCE = "@once"

CALENDAR_START = datetime.min.replace(tzinfo=UTC).timestamp()
CALENDAR_END = datetime(9999, 12, 31, tzinfo=UTC).timestamp() + 86_400.0
"""The calendar: from 0001-01-01 to (not including) 10000-01-01, the moments a datetime can name."""

EARLIEST = datetime(1, 1, 2, tzinfo=UTC).timestamp()
"""The first moment the SDK accepts as a date. A day inside the calendar, so arithmetic around a date
(a millisecond before it, a time zone's offset) stays inside it."""
LATEST = datetime(9999, 12, 31, tzinfo=UTC).timestamp()
"""The first moment past the dates the SDK accepts (the last day of year 9999 is the margin)."""

# What croniter raises for a time or an answer outside the calendar (OSError: EOVERFLOW from the C
# library, far past it), a schedule that finds no fire time (CroniterBadDateError is a ValueError),
# or a schedule it cannot read after all.
_NO_ANSWER = (ValueError, OverflowError, OSError, KeyError, IndexError, TypeError)


def in_calendar(moment: float) -> bool:
    """Whether ``moment`` names a date: within [CALENDAR_START, CALENDAR_END) (never NaN)."""
    return CALENDAR_START <= moment < CALENDAR_END


def computable(moment: float) -> bool:
    """Whether ``moment`` is a date the SDK accepts: within [EARLIEST, LATEST) (never NaN)."""
    return EARLIEST <= moment < LATEST


def valid(schedule: str) -> bool:
    """Whether croniter reads ``schedule`` (a cron expression or one of its presets)."""
    try:
        return bool(croniter.is_valid(schedule))
    except _NO_ANSWER:
        return False


def next_fire(schedule: str, after: float) -> float | None:
    """The first fire time strictly after ``after``; None when there is none in the calendar."""
    try:
        fire = float(_cron(schedule, after).get_next(float))
    except _NO_ANSWER:
        return None
    return fire if math.isfinite(fire) else None


def latest_fire(schedule: str, until: float) -> float | None:
    """The last fire time at or before ``until``; None when there is none in the calendar."""
    try:
        fire = float(_cron(schedule, until + 1e-6).get_prev(float))
    except _NO_ANSWER:
        return None
    return fire if math.isfinite(fire) else None


def fire_times(schedule: str, after: float, until: float, most: int) -> tuple[list[float], bool]:
    """The fire times strictly after ``after`` and at or before ``until``, at most ``most`` of them;
    and whether they ran out first (no fire time in the calendar after the last, ``until`` later)."""
    times: list[float] = []
    try:
        cron = _cron(schedule, after)
        while len(times) < most:
            fire = float(cron.get_next(float))
            if not fire <= until:  # past it (or no finite answer)
                return times, not math.isfinite(fire)
            times.append(fire)
    except _NO_ANSWER:
        return times, True
    return times, False


def plannable(schedule: str, start: float, end: float) -> bool:
    """Whether every fire time of a range from ``start`` to ``end`` can be computed, so a backfill of it
    can be planned: the rule the API refuses a backfill by (422) and the scheduler plans by. Walking
    the fire times, the first and the one after the last are the steps that can leave the calendar."""
    first = next_fire(schedule, max(start - 1e-3, CALENDAR_START))
    if first is None or first > end:
        return first is not None
    last = latest_fire(schedule, end)
    return last is not None and next_fire(schedule, last) is not None


def data_interval(schedule: str | None, run_type: str, logical_date: float) -> tuple[float, float]:
    """The data interval of a run: for a scheduled or backfill run of a cron schedule (or preset), from
    the schedule's previous fire time to the run's logical date (the fire time it runs for); else
    (a manual run, ``@once``, no schedule) empty, at the logical date. Tock's logical date is the end
    of the interval, as in Airflow 3, where a scheduled run runs at its logical date."""
    if schedule is None or schedule == ONCE or run_type not in ("scheduled", "backfill"):
        return logical_date, logical_date
    start = latest_fire(schedule, logical_date - 1e-3)
    return (logical_date if start is None else start), logical_date


def _cron(schedule: str, start: float) -> croniter:
    return croniter(schedule, datetime.fromtimestamp(start, tz=UTC))
