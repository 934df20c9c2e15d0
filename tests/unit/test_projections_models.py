"""dag, dag_run, scheduler, parse_status and import_error: given events, then rows."""

from __future__ import annotations

import dataclasses

from projections.view import fold
from schemas import (
    DagFileProcessed,
    DagFileRemoved,
    DagParseFailed,
    DagRemoved,
    DagRunCreated,
    DagRunFinished,
    DeadlineMissed,
    PauseDag,
    SchedulerHeartbeat,
    SchedulerStopped,
)
from tests.unit.projection_logs import LogBuilder, dag_parsed


def _rows(*events, tombstones=()):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    for dag_id, at in tombstones:
        builder.tombstone(dag_id, at)
    return fold(builder.records).rows


def test_a_parsed_dag_is_active_with_its_definition():
    row = _rows(dag_parsed("etl", 10.0))["dag"][("etl",)]
    assert (row["is_active"], row["schedule"], row["file_path"]) == (True, "@hourly", "/dags/etl.py")
    assert '"extract"' in row["tasks_json"]


def test_a_parsed_dags_row_has_what_the_ui_shows():
    parsed = dag_parsed("etl", 10.0)
    definition = dataclasses.replace(parsed.definition, description="nightly", doc_md="# ETL",
                                     owner_links={"ann": "mailto:ann@example.com"}, dag_display_name="ETL",
                                     tasks=[dataclasses.replace(parsed.definition.tasks[0], owner="ann"),
                                            *parsed.definition.tasks[1:]])
    row = _rows(dataclasses.replace(parsed, definition=definition))["dag"][("etl",)]
    assert (row["description"], row["doc_md"], row["dag_display_name"], row["owners"]) == (
        "nightly", "# ETL", "ETL", "airflow, ann")
    assert row["owner_links_json"] == '{"ann":"mailto:ann@example.com"}'


def test_a_removed_or_tombstoned_dag_is_inactive_until_parsed_again():
    removed = _rows(dag_parsed("etl", 10.0), DagRemoved(dag_id="etl", file_path="/dags/etl.py", at=20))
    tombstoned = _rows(dag_parsed("etl", 10.0), tombstones=[("etl", 20.0)])
    back = _rows(dag_parsed("etl", 10.0), DagRemoved(dag_id="etl", file_path="/dags/etl.py", at=20),
                 dag_parsed("etl", 30.0))
    assert [r["dag"][("etl",)]["is_active"] for r in (removed, tombstoned, back)] == [False, False, True]


def test_pause_and_unpause():
    paused = _rows(dag_parsed("etl", 1.0), PauseDag(dag_id="etl", paused=True, at=2))["dag"][("etl",)]
    resumed = _rows(dag_parsed("etl", 1.0), PauseDag(dag_id="etl", paused=True, at=2),
                    PauseDag(dag_id="etl", paused=False, at=3))["dag"][("etl",)]
    assert (paused["is_paused"], resumed["is_paused"]) == (True, False)


def test_run_lifecycle():
    created = DagRunCreated(dag_id="etl", run_id="r1", logical_date=5.0, run_type="manual", conf_json='{"a":1}',
                            dag_fingerprint="f", scheduler_id="s1", at=6)
    rows = _rows(created)
    finished = _rows(created, DeadlineMissed(dag_id="etl", run_id="r1", deadline=7, at=7),
                     DagRunFinished(dag_id="etl", run_id="r1", state="failed", at=8))
    assert rows["dag_run"][("etl", "r1")]["state"] == "running"
    row = finished["dag_run"][("etl", "r1")]
    assert (row["state"], row["end_date"], row["deadline_missed_at"], row["conf_json"]) == ("failed", 8, 7, '{"a":1}')


def test_import_error_is_cleared_by_a_later_clean_parse_of_the_file():
    failed = DagParseFailed(file_path="/d/a.py", processor_id="p", file_hash="h", error="SyntaxError", at=1)
    ok = DagFileProcessed(file_path="/d/a.py", processor_id="p", file_hash="h2", dag_ids=["a"], duration=0.1, at=2)
    assert _rows(failed)["import_error"][("/d/a.py",)]["error"] == "SyntaxError"
    rows = _rows(failed, ok)
    assert rows["import_error"][("/d/a.py",)] is None
    assert (rows["parse_status"][("/d/a.py",)]["state"], rows["parse_status"][("/d/a.py",)]["dag_ids_json"]) \
        == ("ok", '["a"]')


def test_import_error_and_parse_status_vanish_with_their_file_and_come_back_with_it():
    failed = DagParseFailed(file_path="/d/a.py", processor_id="p", file_hash="h", error="SyntaxError", at=1)
    ok_b = DagFileProcessed(file_path="/d/b.py", processor_id="p", file_hash="h", dag_ids=["b"], duration=0.1, at=1)
    gone = [DagFileRemoved(file_path="/d/a.py", at=2), DagFileRemoved(file_path="/d/b.py", at=2)]
    rows = _rows(failed, ok_b, *gone)
    assert rows["import_error"][("/d/a.py",)] is None
    assert rows["parse_status"][("/d/a.py",)] is None and rows["parse_status"][("/d/b.py",)] is None
    back = _rows(failed, *gone, DagParseFailed(file_path="/d/a.py", processor_id="p", file_hash="h", error="again",
                                               at=3))
    assert back["import_error"][("/d/a.py",)]["error"] == "again"
    assert back["parse_status"][("/d/a.py",)]["state"] == "failed"


def test_scheduler_liveness():
    beat = SchedulerHeartbeat(scheduler_id="s1", hostname="h", pid=3, partitions=[2, 0], at=1)
    alive = _rows(beat)["scheduler"][("s1",)]
    stopped = _rows(beat, SchedulerStopped(scheduler_id="s1", at=2))["scheduler"][("s1",)]
    assert (alive["state"], alive["partitions_json"]) == ("alive", "[0,2]")
    assert (stopped["state"], stopped["stopped_at"]) == ("stopped", 2)
