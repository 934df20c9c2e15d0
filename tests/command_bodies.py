"""Hypothesis strategies for the API's trigger and backfill request bodies: any JSON, with dates and
confs drawn where the scheduler's calendar and Kafka's record size have their edges."""

from __future__ import annotations

import datetime as dt

from hypothesis import strategies as st

SCHEDULES = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly", "0 0 29 2 *", "0 0 1 1 *", "*/15 * * * *",
             "0 12 * * 1-5", "0 0 31 * *")
_EDGES = [dt.datetime(*parts, tzinfo=dt.UTC).timestamp() for parts in
          [(1970, 1, 1), (1970, 1, 1, 0, 0, 1), (9998, 12, 31, 23, 59, 59), (9999, 1, 1), (9999, 12, 31),
           (2024, 2, 29)]]

json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=12)

seconds = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(_EDGES),
                    st.floats(min_value=-1e10, max_value=3e11), st.integers(min_value=-(10**20), max_value=10**20))
iso_dates = st.one_of(
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)).map(lambda w: w.isoformat()),
    st.datetimes(min_value=dt.datetime(9990, 1, 1), max_value=dt.datetime(9999, 12, 31)).map(lambda w: w.isoformat()),
    st.sampled_from(["2024-01-31", "2024-02-30", "yesterday", "", "9999-06-01", "1969-12-31T23:59:59Z",
                     "9998-12-31T23:00-05:00", "0001-01-01"]))
dates = seconds | iso_dates
confs = st.dictionaries(st.text(max_size=8), json_values, max_size=5) | json_values


@st.composite
def trigger_bodies(draw) -> dict:
    body = draw(st.fixed_dictionaries({}, optional={"conf": confs, "logical_date": st.none() | seconds | json_values}))
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.text(max_size=5))] = draw(json_values)  # an unknown field
    return body


@st.composite
def backfill_bodies(draw) -> dict:
    """Mostly short ranges (a planned range is walked fire time by fire time) near the calendar's edges."""
    start = draw(dates)
    if isinstance(start, float | int) and draw(st.booleans()):
        end = start + draw(st.floats(min_value=-86_400, max_value=400 * 86_400))
    else:
        end = draw(dates)
    body = {"start_date": start, "end_date": end}
    optional = draw(st.fixed_dictionaries({}, optional={"reprocess_failed": st.booleans() | json_scalars,
                                                        "conf": confs}))
    return {**body, **optional}
