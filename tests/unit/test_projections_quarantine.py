"""A DAG the scheduler quarantined is shown like an import error, apart from its file's own parse
status, until the quarantine is lifted."""

from __future__ import annotations

from projections.import_error import quarantine_key
from projections.view import fold
from schemas import DagFileProcessed, DagParseFailed, DagQuarantined, DagQuarantineLifted
from tests.unit.projection_logs import LogBuilder

QUARANTINED = DagQuarantined(dag_id="poison", file_path="/d/a.py", reason="folding DagParsed raised ValueError: x",
                             fingerprint="fp1", scheduler_id="s1", at=5.0)
KEY = (quarantine_key("/d/a.py", "poison"),)


def _errors(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records).rows["import_error"]


def test_a_quarantined_dag_is_an_import_error_naming_the_dag_the_reason_and_the_scheduler():
    row = _errors(QUARANTINED)[KEY]
    assert row["file_path"] == "/d/a.py#poison"
    assert "DAG poison is quarantined" in row["error"] and "raised ValueError: x" in row["error"]
    assert (row["processor_id"], row["file_hash"], row["at"]) == ("s1", "fp1", 5.0)


def test_a_clean_parse_of_its_file_leaves_the_quarantine_shown():
    processed = DagFileProcessed(file_path="/d/a.py", processor_id="p", file_hash="h", dag_ids=["poison"],
                                 duration=0.1, at=6.0)
    failed = DagParseFailed(file_path="/d/a.py", processor_id="p", file_hash="h", error="SyntaxError", at=7.0)
    errors = _errors(QUARANTINED, processed, failed)
    assert errors[KEY]["file_hash"] == "fp1" and errors[("/d/a.py",)]["error"] == "SyntaxError"


def test_the_lift_of_that_quarantine_removes_it_and_a_lift_of_another_does_not():
    lifted = DagQuarantineLifted(dag_id="poison", file_path="/d/a.py", fingerprint="fp1", scheduler_id="s1", at=8.0)
    other = DagQuarantineLifted(dag_id="poison", file_path="/d/a.py", fingerprint="fp0", scheduler_id="s1", at=8.0)
    assert _errors(QUARANTINED, lifted)[KEY] is None
    assert _errors(QUARANTINED, other)[KEY]["file_hash"] == "fp1"
