"""schemas/schedule.py in a DAG's time zone: fire times on its wall clock (Airflow 3's cron rule around
DST changes), zone names and their spelling, data intervals, ISO 8601 dates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import schedule as cron

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def walk(schedule: str, after: float, zone: str, count: int) -> list[str]:
    """The next ``count`` fire times, as UTC times "MM-DD HH:MM"."""
    times, _ = cron.fire_times(schedule, after, after + 30 * 86_400, count, zone)
    return [datetime.fromtimestamp(moment, UTC).strftime("%m-%d %H:%M") for moment in times]


# Europe/Berlin 2024: spring forward on 31 March (02:00 CET -> 03:00 CEST), fall back on
# 27 October (03:00 CEST -> 02:00 CET). New York: 10 March and 3 November 2024, at 02:00.
@pytest.mark.parametrize(("schedule", "after", "zone", "expected"), [
    pytest.param("0 2 * * *", utc(2024, 3, 29), BERLIN, ["03-29 01:00", "03-30 01:00", "03-31 01:00", "04-01 00:00"],
                 id="daily-02:00-spring-forward: the missing 02:00 is 03:00 CEST, once"),
    pytest.param("0 2 * * *", utc(2024, 10, 24, 12), BERLIN,
                 ["10-25 00:00", "10-26 00:00", "10-27 01:00", "10-28 01:00"],
                 id="daily-02:00-fall-back: the repeated 02:00 is its second occurrence (CET), once"),
    pytest.param("30 2 * * *", utc(2024, 3, 30), BERLIN, ["03-30 01:30", "03-31 01:30", "04-01 00:30"],
                 id="daily-02:30-spring-forward: moved forward by the gap, to 03:30 CEST"),
    pytest.param("0 0 * * *", utc(2024, 3, 29), BERLIN, ["03-29 23:00", "03-30 23:00", "03-31 22:00"],
                 id="midnight-keeps-its-wall-time"),
    pytest.param("@daily", utc(2024, 3, 29), BERLIN, ["03-29 23:00", "03-30 23:00", "03-31 22:00"],
                 id="preset-daily-in-the-zone"),
    pytest.param("0 * * * *", utc(2024, 3, 30, 23), BERLIN,
                 ["03-31 00:00", "03-31 01:00", "03-31 02:00", "03-31 03:00"],
                 id="hourly-spring-forward: every 60 minutes, no hour skipped twice"),
    pytest.param("0 * * * *", utc(2024, 10, 26, 23), BERLIN,
                 ["10-27 00:00", "10-27 01:00", "10-27 02:00", "10-27 03:00"],
                 id="hourly-fall-back: the repeated hour runs twice, 60 minutes apart"),
    pytest.param("@hourly", utc(2024, 10, 26, 23), BERLIN,
                 ["10-27 00:00", "10-27 01:00", "10-27 02:00", "10-27 03:00"], id="preset-hourly"),
    pytest.param("*/30 * * * *", utc(2024, 3, 10, 6), NEW_YORK, ["03-10 06:30", "03-10 07:00", "03-10 07:30"],
                 id="half-hourly-new-york-spring-forward"),
    pytest.param("0 2 * * *", utc(2024, 3, 9), NEW_YORK, ["03-09 07:00", "03-10 07:00", "03-11 06:00"],
                 id="daily-02:00-new-york-spring-forward"),
    pytest.param("0 1 * * *", utc(2024, 11, 2), NEW_YORK, ["11-02 05:00", "11-03 06:00", "11-04 06:00"],
                 id="daily-01:00-new-york-fall-back: second occurrence (EST)"),
    pytest.param("0 9 * * 1-5", utc(2024, 1, 5), "+05:30", ["01-05 03:30", "01-08 03:30", "01-09 03:30"],
                 id="fixed-offset"),
    pytest.param("0 2 * * *", utc(2024, 3, 29), "UTC", ["03-29 02:00", "03-30 02:00", "03-31 02:00"], id="utc"),
])
def test_fire_times_on_the_zones_wall_clock(schedule, after, zone, expected):
    assert walk(schedule, after, zone, len(expected)) == expected
    assert [cron.next_fire(schedule, after, zone)] == [utc(2024, *_parts(expected[0]))]


def _parts(text: str) -> tuple[int, ...]:
    month_day, hour_minute = text.split()
    return (*map(int, month_day.split("-")), *map(int, hour_minute.split(":")))


@pytest.mark.parametrize(("schedule", "after", "expected"), [
    pytest.param("0 2 * * *", utc(2024, 10, 27, 0, 15), utc(2024, 10, 27, 1),
                 id="from inside the first pass: 02:00 CET is still to come"),
    pytest.param("*/20 2 * * *", utc(2024, 10, 27, 0, 50), utc(2024, 10, 27, 1),
                 id="from late in the first pass: the second pass starts over"),
    pytest.param("0 2 * * *", utc(2024, 10, 27, 1, 15), utc(2024, 10, 28, 1), id="from the second pass"),
])
def test_next_fire_from_inside_a_repeated_hour(schedule, after, expected):
    assert cron.next_fire(schedule, after, BERLIN) == expected


@pytest.mark.parametrize(("schedule", "until", "zone", "expected"), [
    pytest.param("0 2 * * *", utc(2024, 10, 27, 0, 15), BERLIN, utc(2024, 10, 26),
                 id="inside the repeated hour, before 02:00 CET comes round: the day before's"),
    pytest.param("0 2 * * *", utc(2024, 10, 27, 1), BERLIN, utc(2024, 10, 27, 1), id="at the fire time itself"),
    pytest.param("0 2 * * *", utc(2024, 3, 31, 1), BERLIN, utc(2024, 3, 31, 1), id="the moved fire time"),
    pytest.param("*/20 2 * * *", utc(2024, 10, 27, 0, 50), BERLIN, utc(2024, 10, 26, 0, 40),
                 id="every fire of the repeated hour is its second pass: all later than until"),
    pytest.param("0 * * * *", utc(2024, 10, 27, 0, 30), BERLIN, utc(2024, 10, 27), id="hourly, first occurrence"),
    pytest.param("0 * * * *", utc(2024, 10, 27, 1, 30), BERLIN, utc(2024, 10, 27, 1), id="hourly, second occurrence"),
])
def test_latest_fire_is_never_after_until(schedule, until, zone, expected):
    assert cron.latest_fire(schedule, until, zone) == expected


HOUR, DAY = 3600.0, 86_400.0


@pytest.mark.parametrize(("schedule", "run_type", "logical", "zone", "start_date", "expected"), [
    pytest.param("0 2 * * *", "scheduled", utc(2024, 3, 31, 1), BERLIN, None,
                 (utc(2024, 3, 30, 1), utc(2024, 3, 31, 1)),
                 id="spring-forward day: 23 hours"),
    pytest.param("0 2 * * *", "scheduled", utc(2024, 10, 27, 1), BERLIN, None,
                 (utc(2024, 10, 26), utc(2024, 10, 27, 1)),
                 id="fall-back day: 25 hours"),
    pytest.param("@daily", "backfill", utc(2024, 4, 1, 22), BERLIN, None, (utc(2024, 3, 31, 22), utc(2024, 4, 1, 22)),
                 id="preset in the zone"),
    pytest.param("@hourly", "scheduled", utc(2024, 10, 27, 2), BERLIN, None,
                 (utc(2024, 10, 27, 1), utc(2024, 10, 27, 2)),
                 id="hourly across fall-back: an hour"),
    pytest.param("0 0 * * 1", "scheduled", utc(2024, 1, 8), "UTC", None, (utc(2024, 1, 1), utc(2024, 1, 8)),
                 id="weekly"),
    pytest.param("0 0 * * *", "scheduled", utc(2024, 1, 1), "UTC", utc(2024, 1, 1), (utc(2024, 1, 1), utc(2024, 1, 1)),
                 id="first run at the start date: empty (no interval starts before the start date)"),
    pytest.param("0 0 * * *", "scheduled", utc(2024, 1, 2), "UTC", utc(2024, 1, 1, 10),
                 (utc(2024, 1, 1, 10), utc(2024, 1, 2)),
                 id="first run after a start date between fire times: from the start date"),
    pytest.param("0 0 * * *", "scheduled", utc(2024, 1, 3), "UTC", utc(2024, 1, 1, 10),
                 (utc(2024, 1, 2), utc(2024, 1, 3)),
                 id="second run: from the previous fire time"),
    pytest.param("0 0 * * *", "backfill", utc(2023, 6, 2), "UTC", utc(2024, 1, 1), (utc(2023, 6, 1), utc(2023, 6, 2)),
                 id="a backfill before the start date keeps its whole interval"),
    pytest.param("0 0 * * *", "manual", utc(2024, 1, 1, 10), BERLIN, None, (utc(2024, 1, 1, 10), utc(2024, 1, 1, 10)),
                 id="manual: empty at the logical date"),
    pytest.param("@once", "scheduled", utc(2024, 1, 1), BERLIN, None, (utc(2024, 1, 1), utc(2024, 1, 1)), id="@once"),
    pytest.param(None, "manual", 5.0, "UTC", None, (5.0, 5.0), id="no schedule"),
])
def test_data_interval(schedule, run_type, logical, zone, start_date, expected):
    assert cron.data_interval(schedule, run_type, logical, zone, start_date=start_date) == expected


def test_data_interval_keeps_its_positional_signature():
    assert cron.data_interval("0 * * * *", "scheduled", utc(2024, 1, 1, 5)) == (utc(2024, 1, 1, 4), utc(2024, 1, 1, 5))


class _Named(tzinfo):
    """A zone of another library: a name, and its offsets (pendulum and pytz zones look so; Tokyo's here)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def utcoffset(self, moment: datetime | None) -> timedelta:
        return timedelta(hours=9)

    def dst(self, moment: datetime | None) -> timedelta:
        return timedelta(0)


@pytest.mark.parametrize(("zone", "name"), [
    (ZoneInfo(BERLIN), BERLIN), (ZoneInfo("UTC"), "UTC"), (UTC, "UTC"), (timezone(timedelta(0)), "UTC"),
    (timezone(timedelta(hours=5, minutes=30)), "+05:30"), (timezone(timedelta(hours=-8)), "-08:00"),
    (timezone(timedelta(minutes=19, seconds=32)), "+00:19:32"), (_Named("Asia/Tokyo"), "Asia/Tokyo"),
])
def test_a_zone_is_spelled_so_it_reads_back(zone, name):
    at = datetime(2024, 7, 1, tzinfo=zone)
    assert cron.zone_name(zone, at) == name
    assert cron.zone_of(name).utcoffset(at.replace(tzinfo=None)) == zone.utcoffset(at)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "+25:00", "+05:61", "05:30", "../etc/passwd", "utc+1"])
def test_an_unknown_zone_name_is_refused_naming_it(name):
    with pytest.raises(ValueError, match="unknown time zone"):
        cron.zone_of(name)
    with pytest.raises(ValueError, match="unknown time zone"):
        cron.next_fire("0 * * * *", 0.0, name)  # not "no run": the scheduler quarantines the DAG


@pytest.mark.parametrize("zone", [_Named("Mars/Olympus"), _Named("")])
def test_a_zone_without_a_known_name_is_refused(zone):
    with pytest.raises(ValueError, match="time zone"):
        cron.zone_name(zone, datetime(2024, 1, 1, tzinfo=zone))


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-01-31", utc(2024, 1, 31)),
    ("2024-01-31T06:00", utc(2024, 1, 31, 6)),
    ("2024-01-31 06:00:00", utc(2024, 1, 31, 6)),
    ("2024-01-31T06:00:00Z", utc(2024, 1, 31, 6)),
    ("2024-01-31T06:00:00+02:00", utc(2024, 1, 31, 4)),
    (" 2024-01-31T06:00:00.5-05:00 ", utc(2024, 1, 31, 11) + 0.5),
])
def test_parse_date(text, expected):
    assert cron.parse_date(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("tomorrow", "not an ISO 8601"), ("1700000000", "not an ISO 8601"), ("2024-13-01", "not an ISO 8601"),
    ("", "not an ISO 8601"), ("0001-01-01", "outside the dates"), ("9999-12-31T12:00", "outside the dates"),
])
def test_parse_date_refuses_naming_the_problem(text, problem):
    with pytest.raises(ValueError, match=problem):
        cron.parse_date(text)


ZONES = st.sampled_from(["UTC", BERLIN, NEW_YORK, "Australia/Lord_Howe", "Asia/Kathmandu", "America/Santiago",
                         "Pacific/Chatham", "Europe/Dublin", "+05:30", "-03:00"])
SCHEDULES = st.sampled_from(["0 2 * * *", "30 2 * * *", "0 * * * *", "*/15 * * * *", "15 1-3 * * *",
                             "0 0 * * *", "@daily", "@hourly", "@weekly", "0 */2 * * *", "45 23 * * 6",
                             "*/30 2-3 * * *", "0 3 1 * *", "5 0 * 8 *"])
# Days some of those zones change their clocks on (2024), and moments around them: where the rules differ.
CHANGES = [utc(2024, *day) for day in ((3, 10), (3, 31), (4, 7), (9, 8), (9, 29), (10, 6), (10, 27), (11, 3))]
MOMENTS = st.one_of(
    st.floats(min_value=utc(2000, 1, 1), max_value=utc(2040, 1, 1), allow_nan=False),
    st.builds(lambda day, offset: day + offset, st.sampled_from(CHANGES), st.floats(-DAY, 2 * DAY)),
    st.builds(lambda day, minutes: day + minutes * 60.0, st.sampled_from(CHANGES), st.integers(-1440, 2880)))


@settings(max_examples=200, deadline=None)
@given(schedule=SCHEDULES, zone=ZONES, after=MOMENTS)
def test_fire_times_increase_and_each_is_its_own_latest(schedule, zone, after):
    times, _ = cron.fire_times(schedule, after, after + 800 * DAY, 12, zone)
    assert times and times[0] > after
    assert all(earlier < later for earlier, later in zip(times, times[1:], strict=False))
    fire = cron.next_fire(schedule, after, zone)
    assert fire == times[0]
    assert cron.latest_fire(schedule, fire, zone) == fire
    assert all(cron.latest_fire(schedule, moment, zone) == moment for moment in times)
    assert all(cron.next_fire(schedule, earlier, zone) == later for earlier, later in zip(times, times[1:],
                                                                                           strict=False))
    latest = cron.latest_fire(schedule, after, zone)
    assert latest is not None and latest <= after < fire
    assert cron.next_fire(schedule, latest, zone) == fire  # no fire time between the two
