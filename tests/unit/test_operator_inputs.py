"""What operators type and what follows from the tables: dates, request ids, log files, a try's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.api.targets import check_request_id, parse_instant
from services.api.task_logs import log_file, try_has_ended
from tock_cli.appending import derived_request_id

JAN_31 = 1706659200.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("2024-01-31", JAN_31),
    ("2024-01-31T06:00", JAN_31 + 6 * 3600),
    ("2024-01-31 06:00:00", JAN_31 + 6 * 3600),
    ("2024-01-31T06:00:00Z", JAN_31 + 6 * 3600),
    ("2024-01-31T06:00:00+02:00", JAN_31 + 4 * 3600),
    (" 2024-01-31 ", JAN_31),
    (JAN_31, JAN_31),
    (0, 0.0),
])
def test_dates_are_iso_8601_in_utc_unless_an_offset_is_given(text, seconds):
    assert parse_instant(text) == seconds


@pytest.mark.parametrize("text", ["yesterday", "2024-02-30", "31/01/2024", "", 1e300, float("nan"), -1e20])
def test_a_bad_date_names_the_problem(text):
    with pytest.raises(ValueError, match="ISO 8601|not a date between"):
        parse_instant(text)


@pytest.mark.parametrize("request_id", ["K1", "0f3c9a2e7b", "nightly-2024-01-31", "a.b_c~d", "x" * 128])
def test_plain_request_ids_are_taken(request_id):
    assert check_request_id(request_id) == request_id


@pytest.mark.parametrize("request_id", ["", "-x", ".x", "a b", "a/b", "a:b", "x" * 129, "é"])
def test_request_ids_that_could_break_run_ids_or_paths_are_refused(request_id):
    with pytest.raises(ValueError, match="bad request id"):
        check_request_id(request_id)


def test_derived_request_ids_are_stable_distinct_and_valid():
    one, again = derived_request_id("base", "r1", "load"), derived_request_id("base", "r1", "load")
    assert one == again and one.startswith("base.")
    assert len({one, derived_request_id("base", "r1", "extract"), derived_request_id("base", "r2", "load")}) == 3
    assert check_request_id(derived_request_id("x" * 128, "r1", "load"))


def test_a_try_log_file_is_where_the_runner_writes_it():
    home = Path("/srv/tock")
    path = log_file(home, "etl", "scheduled__2024-01-31T00:00:00+00:00", "load", 2)
    assert path == home / "tries/etl/scheduled__2024-01-31T00-00-00_00-00/load/2.log"


@pytest.mark.parametrize(("dag", "task"), [("..", "x"), ("etl", "../../../etc")])
def test_a_name_that_would_leave_the_tries_folder_is_refused(dag, task):
    with pytest.raises(ValueError, match="not a log file under"):
        log_file(Path("/srv/tock"), dag, "r1", task, 1)


def _instance(state, try_number=1):
    return {"state": state, "try_number": try_number}


@pytest.mark.parametrize(("instance", "try_number", "ended"), [
    (None, 1, False),
    (_instance("queued"), 1, False),
    (_instance("running"), 1, False),
    (_instance("running"), 2, False),  # a later try than the table knows: not started yet
    (_instance("queued", 2), 1, True),  # a later try exists
    *[(_instance(state), 1, True) for state in ("success", "failed", "up_for_retry", "dead", "killed", "cleared",
                                                "skipped", "removed", "upstream_failed")],
    (_instance("upstream_failed", None), 1, True),
    (_instance(None, None), 1, False),
])
def test_when_a_try_has_ended(instance, try_number, ended):
    assert try_has_ended(instance, try_number) is ended
