"""DAG(start_date=..., end_date=...): the DAG's time zone by Airflow's rule (the start date's own zone;
naive: UTC), its end date, both in the definition the DAG processor publishes; refusals naming the
problem."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from schemas import DagParsed, decode, encode
from schemas import schedule as cron
from tock import DAG, BashTask, DagDefinitionError, fingerprint


def definition_of(**dates):
    with DAG("etl", schedule="0 2 * * *", **dates) as dag:
        BashTask("a", "true")
    return dag.to_definition("/dags/etl.py")


@pytest.mark.parametrize(("dates", "zone", "start", "end"), [
    pytest.param({}, "UTC", None, None, id="no dates"),
    pytest.param({"start_date": datetime(2024, 1, 1)}, "UTC", datetime(2024, 1, 1, tzinfo=UTC), None, id="naive: UTC"),
    pytest.param({"start_date": date(2024, 1, 1)}, "UTC", datetime(2024, 1, 1, tzinfo=UTC), None, id="a date"),
    pytest.param({"start_date": datetime(2024, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))}, "Europe/Berlin",
                 datetime(2023, 12, 31, 23, tzinfo=UTC), None, id="zoneinfo"),
    pytest.param({"start_date": datetime(2024, 7, 1, tzinfo=timezone(timedelta(hours=-4)))}, "-04:00",
                 datetime(2024, 7, 1, 4, tzinfo=UTC), None, id="fixed offset"),
    pytest.param({"start_date": datetime(2024, 1, 1, tzinfo=UTC)}, "UTC", datetime(2024, 1, 1, tzinfo=UTC), None,
                 id="datetime.UTC"),
    pytest.param({"start_date": datetime(2024, 1, 1, tzinfo=ZoneInfo("America/New_York")),
                  "end_date": datetime(2024, 6, 30, tzinfo=ZoneInfo("America/New_York"))}, "America/New_York",
                 datetime(2024, 1, 1, 5, tzinfo=UTC), datetime(2024, 6, 30, 4, tzinfo=UTC), id="end date in a zone"),
    pytest.param({"end_date": datetime(2030, 1, 1)}, "UTC", None, datetime(2030, 1, 1, tzinfo=UTC),
                 id="an end date alone, naive: UTC"),
])
def test_the_definition_carries_the_zone_and_the_dates(dates, zone, start, end):
    definition = definition_of(**dates)
    assert definition.timezone == zone
    assert definition.start_date == (start.timestamp() if start else None)
    assert definition.end_date == (end.timestamp() if end else None)
    cron.zone_of(definition.timezone)  # the scheduler reads it back


def test_the_zone_and_end_date_round_trip_through_the_log_and_change_the_fingerprint():
    berlin = definition_of(start_date=datetime(2024, 1, 1, tzinfo=ZoneInfo("Europe/Berlin")),
                           end_date=datetime(2024, 12, 31))
    event = DagParsed(dag_id="etl", file_path="/dags/etl.py", fingerprint=fingerprint(berlin), definition=berlin,
                      at=1.0)
    assert decode(encode(event)) == event
    utc = definition_of(start_date=datetime(2023, 12, 31, 23, tzinfo=UTC), end_date=datetime(2024, 12, 31))
    assert utc.start_date == berlin.start_date and fingerprint(utc) != fingerprint(berlin)


class _Nameless(tzinfo):
    def utcoffset(self, moment: datetime | None) -> timedelta:
        return timedelta(hours=2)

    def dst(self, moment: datetime | None) -> timedelta:
        return timedelta(0)


class _Unknown(_Nameless):
    name = "Atlantis/Poseidonia"


@pytest.mark.parametrize(("dates", "problem"), [
    pytest.param({"start_date": datetime(2024, 2, 1), "end_date": datetime(2024, 1, 1)},
                 "end_date 2024-01-01T00:00:00+00:00 is before start_date 2024-02-01T00:00:00+00:00", id="end first"),
    pytest.param({"start_date": datetime(2024, 1, 1, tzinfo=_Nameless())}, "has no IANA name", id="nameless zone"),
    pytest.param({"start_date": datetime(2024, 1, 1, tzinfo=_Unknown())}, "unknown time zone 'Atlantis/Poseidonia'",
                 id="unknown zone"),
    pytest.param({"end_date": "2024-01-01"}, "end_date must be a datetime", id="end date text"),
    pytest.param({"end_date": datetime(1, 1, 1, tzinfo=UTC)}, "end_date 0001-01-01T00:00:00+00:00 is outside",
                 id="end date out of the calendar"),
])
def test_bad_dates_are_refused_naming_the_problem(dates, problem):
    with pytest.raises(DagDefinitionError, match="DAG 'etl'") as refused:
        definition_of(**dates)
    assert problem in refused.value.problem


def test_an_end_date_equal_to_the_start_date_is_taken():
    moment = datetime(2024, 1, 1, 2, tzinfo=UTC)
    assert definition_of(start_date=moment, end_date=moment).end_date == moment.timestamp()
