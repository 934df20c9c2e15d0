"""Properties of the API's trigger and backfill inputs (issue 20): whatever JSON a client sends, the
request models and checks either take it, and then the event encodes and the scheduler can plan it,
or refuse it with a reason. Never an exception of another kind."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas import RequestBackfill, TriggerDagRun
from schemas import schedule as cron
from schemas.codec import decode, encode
from services.api import models, targets
from services.scheduler.core.backfill import MOST_RUNS
from tests.command_bodies import SCHEDULES, backfill_bodies, trigger_bodies

LIMIT = 4096


def _wire(body: dict) -> dict:
    """The body as the API's JSON parser gives it (NaN and Infinity as Python floats)."""
    return json.loads(json.dumps(body))


@settings(max_examples=200, deadline=None)
@given(body=trigger_bodies())
def test_a_trigger_body_is_taken_and_encodes_or_is_refused_with_a_reason(body):
    try:
        request = models.TriggerRequest.model_validate(_wire(body))
        conf_json = targets.conf_text(request.conf, LIMIT)
    except ValidationError as refused:
        assert refused.errors() and all(error["msg"] for error in refused.errors())
        return
    except targets.Refused as refused:
        assert refused.status == targets.INVALID and "TOCK_API_CONF_LIMIT_BYTES" in refused.reason
        return
    event = TriggerDagRun(dag_id="etl", request_id="r1", conf_json=conf_json, logical_date=request.logical_date,
                          requested_by="p", at=1.0)
    assert decode(encode(event)) == event
    json.loads(conf_json)  # strict JSON again: what the tables and pages decode
    if request.logical_date is not None:
        targets.iso(request.logical_date)  # the pages show it as a date


@settings(max_examples=200, deadline=None)
@given(body=backfill_bodies(), schedule=st.sampled_from(SCHEDULES))
def test_a_backfill_body_is_taken_and_plannable_or_is_refused_with_a_reason(body, schedule):
    try:
        request = models.BackfillRequest.model_validate(_wire(body))
        start, end = targets.parse_instant(request.start_date), targets.parse_instant(request.end_date)
        targets.backfill_range({"dag_id": "d", "schedule": schedule}, start, end)
        conf_json = targets.conf_text(request.conf, LIMIT)
    except ValidationError as refused:
        assert refused.errors() and all(error["msg"] for error in refused.errors())
        return
    except targets.Refused as refused:
        assert refused.status in (targets.IMPOSSIBLE, targets.INVALID) and refused.reason
        return
    event = RequestBackfill(dag_id="d", request_id="r1", start_date=start, end_date=end,
                            reprocess_failed=request.reprocess_failed, conf_json=conf_json, requested_by="p", at=1.0)
    assert decode(encode(event)) == event
    # What the scheduler's backfill planning computes (core/backfill.py _plan): an accepted range
    # stays inside the calendar.
    since = max(event.start_date - 1e-3, cron.CALENDAR_START)
    _dates, past_calendar = cron.fire_times(schedule, since, event.end_date, MOST_RUNS + 1)
    assert not past_calendar
