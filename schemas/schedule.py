"""Cron arithmetic shared by the SDK, the scheduler core and the API: the only place that calls croniter.

Times are seconds since the epoch. A schedule is read on the wall clock of a time zone (the DAG's:
``timezone``, default ``"UTC"``), as Airflow 3's cron timetables read it: ``0 2 * * *`` in
Europe/Berlin fires at 02:00 Berlin time, summer and winter. Around a DST change:

- a wall time that does not exist (02:30 on the spring-forward day) is moved forward by the gap
  (03:30), and a wall time that happens twice (02:30 on the fall-back day) is its second occurrence
  (02:30 winter time), so ``0 2 * * *`` fires once on both days;
- a schedule whose hour field is ``*`` (every hour, every 15 minutes...) steps in absolute time from
  the previous fire time, so ``0 * * * *`` fires every 60 minutes through both changes.

Nothing here raises for a schedule or a time it is given: a fire time that does not exist (the
schedule never fires again, or the answer falls outside the calendar of years 1-9999) is ``None``,
and callers read it as "no run". A time zone name the host's zoneinfo does not know raises
ValueError (the SDK refuses such a DAG; a scheduler whose tzdata lacks it quarantines the DAG).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from datetime import timezone as fixed_zone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

ONCE = "@once"
UTC_NAME = "UTC"

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


def parse_date(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 date or date-time (``2024-01-31``, ``2024-01-31T06:00``,
    ``2024-01-31T06:00:00+02:00``, ``...Z``; without an offset: UTC), within the dates the SDK accepts.
    ValueError naming the problem otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not an ISO 8601 date or date-time: {text!r} (e.g. 2024-01-31, 2024-01-31T06:00:00 "
                         "or 2024-01-31T06:00:00+02:00; without an offset it is UTC)") from None
    try:
        moment = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        moment = math.nan
    if not computable(moment):
        raise ValueError(f"{text!r} is outside the dates schedules are computed for (years 1 to 9999)")
    return moment


def valid(schedule: str) -> bool:
    """Whether croniter reads ``schedule`` (a cron expression or one of its presets)."""
    try:
        return bool(croniter.is_valid(schedule))
    except _NO_ANSWER:
        return False


def next_fire(schedule: str, after: float, timezone: str = UTC_NAME) -> float | None:
    """The first fire time strictly after ``after``; None when there is none in the calendar."""
    zone = zone_of(timezone)  # an unknown zone raises: it is no answer about the schedule
    try:
        fire = _next(schedule, after, zone)
    except _NO_ANSWER:
        return None
    return fire if math.isfinite(fire) else None


def latest_fire(schedule: str, until: float, timezone: str = UTC_NAME) -> float | None:
    """The last fire time at or before ``until``; None when there is none in the calendar."""
    zone = zone_of(timezone)
    try:
        fire = _latest(schedule, until, zone)
    except _NO_ANSWER:
        return None
    return fire if math.isfinite(fire) else None


def fire_times(schedule: str, after: float, until: float, most: int,
               timezone: str = UTC_NAME) -> tuple[list[float], bool]:
    """The fire times strictly after ``after`` and at or before ``until``, at most ``most`` of them;
    and whether they ran out first (no fire time in the calendar after the last, ``until`` later)."""
    times: list[float] = []
    zone = zone_of(timezone)
    try:
        following = _following(schedule, after, zone)
        while len(times) < most:
            fire = following()
            if not fire <= until:  # past it (or no finite answer)
                return times, not math.isfinite(fire)
            times.append(fire)
    except _NO_ANSWER:
        return times, True
    return times, False


def plannable(schedule: str, start: float, end: float, timezone: str = UTC_NAME) -> bool:
    """Whether every fire time of a range from ``start`` to ``end`` can be computed, so a backfill of it
    can be planned: the rule the API refuses a backfill by (422) and the scheduler plans by. Walking
    the fire times, the first and the one after the last are the steps that can leave the calendar."""
    first = next_fire(schedule, max(start - 1e-3, CALENDAR_START), timezone)
    if first is None or first > end:
        return first is not None
    last = latest_fire(schedule, end, timezone)
    return last is not None and next_fire(schedule, last, timezone) is not None


def data_interval(schedule: str | None, run_type: str, logical_date: float, timezone: str = UTC_NAME, *,
                  start_date: float | None = None) -> tuple[float, float]:
    """The data interval of a run: for a scheduled or backfill run of a cron schedule (or preset), from
    the schedule's previous fire time (in the DAG's ``timezone``) to the run's logical date (the fire
    time it runs for); else (a manual run, ``@once``, no schedule) empty, at the logical date. Tock's
    logical date is the end of the interval, as in Airflow 3, where a scheduled run runs at its
    logical date. No interval starts before the DAG's ``start_date`` (Airflow's rule for the first
    one): the first run's interval starts at the start date (empty when it is a fire time)."""
    if schedule is None or schedule == ONCE or run_type not in ("scheduled", "backfill"):
        return logical_date, logical_date
    start = latest_fire(schedule, logical_date - 1e-3, timezone)
    start = logical_date if start is None else start
    if start_date is not None and start < start_date <= logical_date:
        start = start_date
    return start, logical_date


# -- time zones ----------------------------------------------------------------------------------

_OFFSET = re.compile(r"([+-])(\d\d):(\d\d)(?::(\d\d))?")


@lru_cache(maxsize=512)
def zone_of(name: str) -> tzinfo:
    """The time zone a definition names: ``"UTC"``, a fixed offset (``"+05:30"``, ``"-08:00"``,
    ``"+00:19:32"``) or an IANA name zoneinfo knows; ValueError naming it otherwise."""
    if name == UTC_NAME:
        return UTC
    fixed = _OFFSET.fullmatch(name)
    if fixed:
        sign, hours, minutes, seconds = fixed.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds or 0))
        if offset < timedelta(hours=24) and int(minutes) < 60 and int(seconds or 0) < 60:
            return fixed_zone(-offset if sign == "-" else offset)
    else:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValueError(f"unknown time zone {name!r}: not an IANA name this host's zoneinfo knows (such as "
                     "Europe/Berlin or America/New_York), nor a fixed offset such as +05:30")


def zone_name(zone: tzinfo, at: datetime) -> str:
    """How a definition spells ``zone`` (``zone_of`` reads it back): an IANA key, ``"UTC"`` or a fixed
    offset. ``at`` is a moment in it (a fixed-offset zone's offset is read there). ValueError for a
    zone without a name that is not a fixed offset."""
    if isinstance(zone, fixed_zone):  # datetime.timezone, UTC included
        return _offset_name(zone.utcoffset(at))
    name = zone.key if isinstance(zone, ZoneInfo) else _named(zone)
    if not isinstance(name, str) or not name:
        raise ValueError(f"time zone {zone!r} has no IANA name: use zoneinfo.ZoneInfo('Area/City') "
                         "or a datetime.timezone offset")
    zone_of(name)  # the scheduler must be able to read it back
    return name


def _named(zone: tzinfo) -> object:
    """The name other libraries' zones carry (pendulum: ``name``, pytz: ``zone``)."""
    for attribute in ("key", "zone", "name"):
        name = getattr(zone, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None


def _offset_name(offset: timedelta) -> str:
    if not offset:
        return UTC_NAME
    sign, size = ("-", -offset) if offset < timedelta(0) else ("+", offset)
    hours, rest = divmod(int(size.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


# -- fire times on a zone's wall clock --------------------------------------------------------

_DAY, _MICROSECOND = timedelta(days=1), timedelta(microseconds=1)
# Wall times a step may pass over before it finds its answer: the fire times of the wall clock that a
# fall-back repeats (every second of an hour, for a six-field schedule), and a few more.
_MOST_STEPS = 4_000


def _next(schedule: str, after: float, zone: tzinfo) -> float:
    if zone is UTC:
        return float(_cron(schedule, after).get_next(float))
    return _step(schedule, after, zone, forward=True)


def _latest(schedule: str, until: float, zone: tzinfo) -> float:
    if zone is UTC:  # (croniter's previous is strictly before: a microsecond later, it is at or before)
        return float(croniter(schedule, _datetime(until, UTC) + _MICROSECOND).get_prev(float))
    fire = _step(schedule, until, zone, forward=False)
    # The fire times are the ones stepping forward finds (Airflow states its rule forward). Stepping back
    # over a clock change of half an hour can land beside them: walk forward to the last one again.
    for _ in range(_MOST_STEPS):
        following = _step(schedule, fire, zone, forward=True)
        if following > until:
            return fire
        fire = following
    raise ValueError(f"no fire time of {schedule!r} found near {until!r}")


def _following(schedule: str, after: float, zone: tzinfo) -> Callable[[], float]:
    """A function giving the fire times after ``after`` one by one: croniter's own walk in UTC, and
    for a schedule with an hour field on a zone's wall clock (the times ``_step`` gives one by one)."""
    if zone is UTC:
        cron = _cron(schedule, after)
        return lambda: float(cron.get_next(float))
    current = _datetime(after, zone)
    wall = current.replace(tzinfo=None, fold=0)
    if croniter(schedule, wall).expanded[1] == ["*"]:
        return _stepping(schedule, after, zone)
    walk, last = croniter(schedule, wall - _repeated(current)), [after]

    def following() -> float:
        for _ in range(_MOST_STEPS):
            fire = _localized(walk.get_next(datetime), zone)
            if fire > last[0]:  # (wall times moved forward out of a gap can land before the last)
                last[0] = fire
                return fire
        raise ValueError(f"no fire time of {schedule!r} found after {last[0]!r}")
    return following


def _stepping(schedule: str, after: float, zone: tzinfo) -> Callable[[], float]:
    last = [after]

    def following() -> float:
        last[0] = _step(schedule, last[0], zone, forward=True)
        return last[0]
    return following


def _step(schedule: str, moment: float, zone: tzinfo, *, forward: bool) -> float:
    """The first fire time after ``moment`` (or the last at or before it), croniter reading the wall
    clock of ``zone``."""
    current = _datetime(moment, zone)
    wall = current.replace(tzinfo=None, fold=0)
    # (croniter's previous is strictly before its start: a microsecond later, it is at or before)
    start = wall if forward else wall + _MICROSECOND
    cron = croniter(schedule, start)
    if cron.expanded[1] == ["*"]:
        fire: datetime = cron.get_next(datetime) if forward else cron.get_prev(datetime)
        if -_DAY < fire - wall < _DAY:
            # Every hour: step in absolute time, so a changed clock neither skips nor repeats an hour.
            return (current.astimezone(UTC) + (fire - wall)).timestamp()
    # In the first pass of a repeated hour, wall times already passed come round again (their second
    # occurrence is the fire time): walk forward from where the repeated wall clock began.
    cron = croniter(schedule, start - _repeated(current) if forward else start)
    for _ in range(_MOST_STEPS):
        found = _localized(cron.get_next(datetime) if forward else cron.get_prev(datetime), zone)
        if (found > moment) if forward else (found <= moment):
            return found
    raise ValueError(f"no fire time of {schedule!r} found near {moment!r}")


def _repeated(current: datetime) -> timedelta:
    """How much of the wall clock comes round again after ``current``: in the first pass of a fall-back,
    the fold's size; else nothing."""
    early, late = current.utcoffset(), current.replace(fold=1).utcoffset()
    if current.fold or early is None or late is None or early <= late:
        return timedelta(0)
    return early - late


def _localized(wall: datetime, zone: tzinfo) -> float:
    """The moment of a wall time in ``zone``: a wall time in a gap (spring forward) is moved forward
    by the gap; one that happens twice (fall back) is its second occurrence (Airflow's rule)."""
    early, late = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    before, after = early.utcoffset(), late.utcoffset()
    if before is not None and after is not None and after > before:  # a gap
        return (wall + (after - before)).replace(tzinfo=zone, fold=1).timestamp()
    return late.timestamp()


def _cron(schedule: str, start: float) -> croniter:
    return croniter(schedule, _datetime(start, UTC))


def _datetime(moment: float, zone: tzinfo) -> datetime:
    """``moment`` in ``zone``, rounded down to the microsecond: rounding half a microsecond up onto a
    fire time would step over it."""
    whole = math.floor(moment)
    exact = datetime.fromtimestamp(whole, UTC) + timedelta(microseconds=math.floor((moment - whole) * 1e6))
    return exact.astimezone(zone)
