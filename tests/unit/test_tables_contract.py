"""Tables as a contract (projections/contract): the declaration covers every table and column, each
published version only grows (its frozen record), and docs/tables.md is what the generator writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from typer.testing import CliRunner

from projections.contract.docs import DOCS_PATH, render
from projections.contract.frozen import (
    WRITE_COMMAND,
    breaking_changes,
    contract_problems,
    frozen_versions,
    unrecorded_growth,
)
from projections.contract.surface import CURRENT, HIDDEN_COLUMNS, LEFT_OUT, VERSIONS, shape, view_name
from projections.contract.views import declared_views
from projections.tables import LIVE
from tock_cli import app

REPO = Path(__file__).resolve().parents[2]
FROZEN = {"tock_v1_pool": {"pool": "VARCHAR", "slots": "INTEGER"}}


def test_every_projection_table_is_offered_or_left_out_with_a_reason():
    offered = {public.table for public in VERSIONS[CURRENT]}
    assert not offered & set(LEFT_OUT)
    undecided = set(LIVE.names) - offered - set(LEFT_OUT)
    assert not undecided, (f"tables {sorted(undecided)} are neither offered (projections/contract/surface.py) "
                           "nor in LEFT_OUT with the reason")
    assert set(LEFT_OUT) <= set(LIVE.names)


def test_every_column_of_an_offered_table_is_offered_or_hidden_with_a_reason():
    hidden = {column for columns, _reason in HIDDEN_COLUMNS for column in columns}
    offered = {f"{public.table}.{name}" for public in VERSIONS[CURRENT] for name in public.columns}
    every = {f"{public.table}.{column.name}" for public in VERSIONS[CURRENT] for column in LIVE[public.table].c}
    assert not offered & hidden
    undecided = every - offered - hidden
    assert not undecided, (f"columns {sorted(undecided)} of offered tables are neither offered (append them to "
                           "their view) nor in HIDDEN_COLUMNS with the reason")
    assert hidden <= every, f"HIDDEN_COLUMNS names columns the tables lack: {sorted(hidden - every)}"


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_each_declared_column_has_a_one_line_meaning_and_a_type_from_the_metadata(version):
    for public in VERSIONS[version]:
        assert public.row and "\n" not in public.row
        for name, meaning in public.columns.items():
            assert meaning.endswith(".") and "\n" not in meaning, f"{public.table}.{name}: {meaning!r}"
            assert name in LIVE[public.table].c, f"{public.table} has no column {name}"
    assert shape(version)[view_name(version, "dag_run")]["logical_date"] == str(LIVE["dag_run"].c.logical_date.type)


def test_the_declaration_keeps_every_frozen_record():
    assert frozen_versions() == sorted(VERSIONS), f"run `{WRITE_COMMAND}` to record each declared version"
    problems = contract_problems()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("declared", "why"), [
    ({"tock_v1_pool": {"pool": "VARCHAR"}}, "tock_v1_pool: lost slots;"),
    ({"tock_v1_pool": {"pool": "VARCHAR", "size": "INTEGER"}}, "tock_v1_pool: lost slots;"),
    ({"tock_v1_pool": {"pool": "VARCHAR", "slots": "BIGINT"}}, "tock_v1_pool: retyped slots INTEGER -> BIGINT;"),
    ({"tock_v1_pool": {"slots": "INTEGER", "pool": "VARCHAR"}}, "tock_v1_pool: moved columns"),
    ({"tock_v1_pool": {"pool": "VARCHAR", "note": "TEXT", "slots": "INTEGER"}}, "tock_v1_pool: moved columns"),
    ({"tock_v1_dag": {"dag_id": "VARCHAR"}}, "tock_v1_pool (frozen in version 1) is no longer declared"),
])
def test_removing_renaming_retyping_or_moving_a_frozen_column_breaks_the_version(declared, why):
    problems = breaking_changes(1, FROZEN, declared)
    assert len(problems) == 1
    assert why in problems[0]
    assert "declare the new shape as version 2" in problems[0]


@pytest.mark.parametrize("declared", [
    FROZEN,
    {"tock_v1_pool": {"pool": "VARCHAR", "slots": "INTEGER", "description": "TEXT"}},
    {**FROZEN, "tock_v1_dag": {"dag_id": "VARCHAR"}},
])
def test_a_version_may_grow_at_the_end_of_a_view_or_by_a_view(declared):
    assert breaking_changes(1, FROZEN, declared) == []


def test_growth_not_yet_recorded_is_named():
    declared = {"tock_v1_pool": {**FROZEN["tock_v1_pool"], "description": "TEXT"}, "tock_v1_dag": {"dag_id": "X"}}
    assert unrecorded_growth(FROZEN, declared) == ["tock_v1_pool: description", "tock_v1_dag: dag_id"]
    assert unrecorded_growth(FROZEN, FROZEN) == []


def test_docs_tables_md_is_what_the_generator_writes():
    written = (REPO / DOCS_PATH).read_text() if (REPO / DOCS_PATH).exists() else ""
    assert written == render(), f"{DOCS_PATH} is stale: run `{WRITE_COMMAND}` from the repository root and commit it"


def test_the_docs_name_every_view_column_and_left_out_table():
    text = render()
    for version, tables in VERSIONS.items():
        for public in tables:
            assert f"### {view_name(version, public.table)}\n" in text
            for name in public.columns:
                assert f"| `{name}`" in text
    for table in LEFT_OUT:
        assert f"- `{table}`: " in text


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_each_view_selects_exactly_its_declared_columns_from_its_live_table(dialect):
    shapes = {view: columns for version in VERSIONS for view, columns in shape(version).items()}
    for name, query in declared_views():
        assert list(query.selected_columns.keys()) == list(shapes[name])
        compiled = str(query.compile(dialect=dialect))
        assert compiled.startswith("SELECT ") and compiled.count("FROM ") == 1


def test_the_command_prints_the_contract():
    result = CliRunner().invoke(app, ["projections", "contract"])
    assert result.exit_code == 0, result.output
    assert result.output == render()


def _pool_view_changed(monkeypatch, tmp_path, columns: dict[str, str]) -> None:
    """Version 1 with the pool view offering ``columns``, frozen records read and written in ``tmp_path``."""
    import shutil
    from dataclasses import replace

    from projections.contract import frozen

    shutil.copy(frozen.frozen_path(1), tmp_path / "v1.json")
    monkeypatch.setattr(frozen, "FROZEN_DIR", tmp_path)
    monkeypatch.setitem(VERSIONS, 1, tuple(replace(public, columns=columns) if public.table == "pool" else public
                                           for public in VERSIONS[1]))


def test_writing_records_growth_at_the_end_of_a_view(monkeypatch, tmp_path):
    from projections.contract.frozen import load_frozen, record_growth

    pool = next(public for public in VERSIONS[1] if public.table == "pool")
    _pool_view_changed(monkeypatch, tmp_path, {**pool.columns, "grants_json": "The grants."})
    assert contract_problems()[0].startswith("version 1 grew (tock_v1_pool: grants_json)")
    assert record_growth() == []
    assert list(load_frozen(1)["tock_v1_pool"])[-1] == "grants_json"
    assert contract_problems() == []


def test_writing_refuses_a_change_that_does_not_only_grow(monkeypatch, tmp_path):
    pool = next(public for public in VERSIONS[1] if public.table == "pool")
    _pool_view_changed(monkeypatch, tmp_path, {name: meaning for name, meaning in pool.columns.items()
                                               if name != "description"})
    before = (tmp_path / "v1.json").read_text()
    result = CliRunner().invoke(app, ["projections", "contract", "--write", "--docs", str(tmp_path / "tables.md")])
    assert result.exit_code == 1
    assert "tock_v1_pool: lost description" in result.output
    assert (tmp_path / "v1.json").read_text() == before
    assert not (tmp_path / "tables.md").exists()
