"""The writer on SQLite and PostgreSQL: committed tables equal the pure fold, however batched."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from projections.rebuild import compare
from projections.tables import LIVE, Tables
from projections.view import fold
from projections.writer import OffsetsMoved, commit_batch, stored_offsets
from schemas import DagFileProcessed, DagParseFailed
from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.unit.projection_logs import LogBuilder, lifecycle, logs

pytestmark = pytest.mark.integration


def _refuse(record, reason):
    raise AssertionError(f"unexpected dead letter {record}: {reason}")


def _reset(engine) -> None:
    with engine.begin() as connection:
        for table in LIVE.by_name.values():
            connection.execute(delete(table))


def _commit_in_batches(engine, records, cuts, tables=LIVE) -> None:
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        commit_batch(engine, records[start:end], {}, {}, _refuse, tables)


def _db_rows(engine, name: str) -> dict:
    table = LIVE[name]
    primary = [column.name for column in table.primary_key.columns]
    with engine.connect() as connection:
        return {tuple(row[c] for c in primary): dict(row) for row in connection.execute(select(table)).mappings()}


@hypothesis_settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(log=logs(max_size=40), cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=4))
def test_committed_rows_equal_the_fold_in_any_batching_and_replayed(engine, log, cuts):
    _reset(engine)
    _commit_in_batches(engine, log, cuts)
    _commit_in_batches(engine, log, [len(log) // 2])  # replaying the whole log again changes nothing
    view = fold(log)
    for name, rows in view.rows.items():
        assert _db_rows(engine, name) == {key: row for key, row in rows.items() if row is not None}
    history = {(r["topic"], r["partition"], r["offset"]): r for r in view.history}
    assert _db_rows(engine, "task_event") == history
    with engine.connect() as connection:
        assert stored_offsets(connection) == view.offsets


def test_a_batch_starting_past_the_stored_offsets_is_refused(engine):
    builder = LogBuilder()
    for event in lifecycle("etl", "r1", "load", 1, at=10.0):
        builder.add(event)
    record = builder.records[1]
    with pytest.raises(OffsetsMoved):
        commit_batch(engine, [record], {(record.topic, record.partition): 1}, {}, _refuse)


def _assert_db_equals_fold(engine, records) -> None:
    view = fold(records)
    for name, rows in view.rows.items():
        assert _db_rows(engine, name) == {key: row for key, row in rows.items() if row is not None}


def test_a_row_deleted_by_a_later_batch_is_gone(engine):
    builder = LogBuilder()
    failed = DagParseFailed(file_path="/dags/a.py", processor_id="p", file_hash="h1", error="SyntaxError", at=1.0)
    builder.add(failed)
    builder.add(DagFileProcessed(file_path="/dags/a.py", processor_id="p", file_hash="h2", dag_ids=["etl"],
                                 duration=0.1, at=2.0))
    _commit_in_batches(engine, builder.records, [1])
    assert _db_rows(engine, "import_error") == {}
    _assert_db_equals_fold(engine, builder.records)


def test_whole_numbers_in_float_columns_are_stored(engine):
    builder = LogBuilder()  # one batch whose float columns hold both ints and floats
    for task, at in (("load", 10), ("extract", 10.5)):
        for event in lifecycle("etl", "r1", task, 1, at=at):
            builder.add(event)
    _commit_in_batches(engine, builder.records, [])
    _assert_db_equals_fold(engine, builder.records)


def test_compare_finds_a_tampered_row(engine):
    builder = LogBuilder()
    for event in lifecycle("etl", "r1", "load", 1, at=10.0):
        builder.add(event)
    other = Tables("__other")
    other.metadata.create_all(engine)
    try:
        _commit_in_batches(engine, builder.records, [2])
        _commit_in_batches(engine, builder.records, [], other)
        assert compare(engine, LIVE, other) == []
        with engine.begin() as connection:
            connection.execute(LIVE["task_instance"].update().values(state="failed"))
        assert any("task_instance" in line for line in compare(engine, LIVE, other))
    finally:
        other.metadata.drop_all(engine)
