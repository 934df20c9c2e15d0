"""SecretAccessed: every fold of tock.events records it and changes nothing by it; the task history shows
it by name and backend; a try's accesses become one event per distinct access."""

from __future__ import annotations

import dataclasses

from infra.secrets.audit import secret_accessed_events
from projections import task_event
from schemas import SecretAccessed
from services.api.core.views import timeline
from services.monitor.core import fold as monitor_fold
from tests.unit.projection_logs import LogBuilder
from tests.unit.scheduler_fixtures import RUN, created, parsed, queued, state_of

ACCESS = SecretAccessed(dag_id="etl", run_id=RUN, task_id="extract", try_number=1, kind="variable",
                        name="region", backend="env", at=3.5)


def test_the_scheduler_records_it_and_changes_nothing():
    before = [parsed(), created(), queued("extract")]
    assert state_of(*before, ACCESS) == state_of(*before)


def test_the_monitor_folds_it_and_changes_nothing_else():
    before = [parsed(), created(), queued("extract")]
    with_access, without = monitor_fold([*before, ACCESS]), monitor_fold(before)
    assert dataclasses.replace(with_access, events_folded=0) == dataclasses.replace(without, events_folded=0)


def test_the_task_history_shows_the_name_and_backend_never_a_value():
    record = LogBuilder().add(ACCESS)
    rows = task_event.rows_for(record)
    assert [(row["task_id"], row["event_type"], row["try_number"]) for row in rows] == [
        ("extract", "SecretAccessed", 1)]
    history = [{**rows[0], "payload": {"kind": "variable", "name": "region", "backend": "env"}}]
    assert timeline(history)[0]["details"] == "variable region read (env)"


def test_a_tries_accesses_become_one_event_per_distinct_access_in_order():
    events = secret_accessed_events("etl", RUN, "extract", 2, [
        ("variable", "region", "env"), ("connection", "db", "store"), ("variable", "region", "env"),
        ("variable", "missing", "none")], at=9.0, map_index=3)
    assert [(event.kind, event.name, event.backend, event.try_number, event.map_index) for event in events] == [
        ("variable", "region", "env", 2, 3), ("connection", "db", "store", 2, 3), ("variable", "missing", "none", 2, 3)]
