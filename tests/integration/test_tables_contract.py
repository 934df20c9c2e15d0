"""The versioned views (projections/contract) on SQLite and PostgreSQL: the projector creates them, they
show its rows with exactly the documented columns, a rebuild keeps them, and an older view grows in place."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, inspect, text
from typer.testing import CliRunner

from projections.contract.surface import CURRENT, VERSIONS, column_of, shape, view_name
from projections.contract.views import ViewInUse, create_views
from projections.db import open_engine
from schemas import AssetEventRecorded, SetPool
from tests.integration.projection_db import (  # noqa: F401
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.scenarios.scheduler_support import environment
from tests.unit.projection_logs import example_run
from tock_cli import app

pytestmark = pytest.mark.integration

AT = 1_700_000_000.0


def _project(settings, engine: Engine) -> None:
    produce(settings, [*example_run(at=AT), SetPool(pool="etl", slots=4, description="ETL", at=AT),
                       AssetEventRecorded(uri="s3://bucket/x", name="x", event_id="api/1", timestamp=AT, at=AT)])
    with ProjectorThread(settings):
        wait_for(lambda: offsets_reached(engine, log_end(settings)), what="the projector to catch up")


def _select_all(engine: Engine, view: str) -> tuple[list[str], list[dict]]:
    quote = engine.dialect.identifier_preparer.quote
    with engine.connect() as connection:
        result = connection.execute(text(f"SELECT * FROM {quote(view)}"))
        return list(result.keys()), [dict(row._mapping) for row in result]


def _assert_documented_columns(engine: Engine) -> dict[str, list[dict]]:
    rows = {}
    for version in VERSIONS:
        for view, columns in shape(version).items():
            names, rows[view] = _select_all(engine, view)
            assert names == list(columns), f"{view} returns {names}, the contract documents {list(columns)}"
    return rows


def test_the_views_show_the_projected_rows_with_the_documented_columns(projection_settings, engine):
    _project(projection_settings, engine)
    rows = _assert_documented_columns(engine)
    runs = rows[view_name(1, "dag_run")]
    assert [(run["dag_id"], run["run_id"], run["state"], run["conf_json"]) for run in runs] == [
        ("etl", "manual__1", "success", '{"x":1}')]
    instances = {row["task_id"]: (row["state"], row["try_number"]) for row in rows[view_name(1, "task_instance")]}
    assert instances == {"extract": ("success", 1), "transform": ("success", 2), "load": ("success", 1)}
    history = [row["event_type"] for row in rows[view_name(1, "task_event")] if row["task_id"] == "transform"]
    assert history.count("TaskQueued") == 2
    assert [row["file_path"] for row in rows[view_name(1, "import_error")]] == ["/dags/broken.py"]
    assert [(row["pool"], row["slots"]) for row in rows[view_name(1, "pool")]] == [("etl", 4)]
    assert [row["event_id"] for row in rows[view_name(1, "asset_event")]] == ["api/1"]
    assert bool(rows[view_name(1, "dag")][0]["is_active"]) is True
    _assert_documented_types(engine)


def _assert_documented_types(engine: Engine) -> None:
    """The database reports each view column with the documented type (as the Python type it reads as)."""
    inspector = inspect(engine)
    for version, tables in VERSIONS.items():
        for public in tables:
            view = view_name(version, public.table)
            reported = {column["name"]: column["type"].python_type for column in inspector.get_columns(view)}
            assert reported == {name: column_of(public.table, name).type.python_type for name in public.columns}


def test_a_rebuild_swaps_the_tables_in_under_the_same_views(projection_settings, engine):
    _project(projection_settings, engine)
    runs_view = engine.dialect.identifier_preparer.quote(view_name(CURRENT, "dag_run"))
    with engine.begin() as connection:  # an integrator's own view on a versioned view
        connection.execute(text(f"CREATE VIEW my_runs AS SELECT run_id, state FROM {runs_view}"))
    rebuilt = CliRunner().invoke(app, ["projections", "rebuild"], env=environment(projection_settings))
    if engine.dialect.name == "postgresql":  # a view is bound to its table there: the rebuild says what to do
        assert rebuilt.exit_code == 1 and not isinstance(rebuilt.exception, ViewInUse)  # a message, no traceback
        assert "tock projections rebuild: cannot drop the view" in rebuilt.output
        assert "drop your objects that depend on it" in rebuilt.output
        _assert_documented_columns(engine)  # the failed swap changed nothing
        with engine.begin() as connection:
            connection.execute(text("DROP VIEW my_runs"))
        rebuilt = CliRunner().invoke(app, ["projections", "rebuild"], env=environment(projection_settings))
    else:  # SQLite resolves names when queried: the integrator's view reads the rebuilt tables
        assert _select_all(engine, "my_runs")[1] == [{"run_id": "manual__1", "state": "success"}]
    assert rebuilt.exit_code == 0, rebuilt.output
    rows = _assert_documented_columns(engine)
    assert [run["state"] for run in rows[view_name(1, "dag_run")]] == ["success"]
    _assert_documented_types(engine)


def test_an_older_narrower_view_grows_in_place_and_creating_the_views_again_changes_nothing(engine):
    quote = engine.dialect.identifier_preparer.quote
    pool_view = view_name(CURRENT, "pool")
    with engine.begin() as connection:  # what an older Tock made: the first two columns only
        connection.execute(text(f"CREATE VIEW {quote(pool_view)} AS SELECT pool, slots FROM pool"))
        # An integrator's own view on it: growing in place keeps it (PostgreSQL would refuse a DROP).
        connection.execute(text(f"CREATE VIEW my_pools AS SELECT pool FROM {quote(pool_view)}"))
    create_views(engine)
    assert _select_all(engine, pool_view)[0] == list(shape(CURRENT)[pool_view])
    assert _select_all(engine, "my_pools")[0] == ["pool"]
    before = _definitions(engine)
    create_views(engine)
    assert _definitions(engine) == before


def test_a_view_a_newer_tock_grew_is_left_as_it_is(engine):
    quote = engine.dialect.identifier_preparer.quote
    pool_view = view_name(CURRENT, "pool")
    columns = ", ".join(quote(name) for name in shape(CURRENT)[pool_view])
    with engine.begin() as connection:
        connection.execute(text(f"CREATE VIEW {quote(pool_view)} AS SELECT {columns}, 1 AS later FROM pool"))
    create_views(engine)
    assert _select_all(engine, pool_view)[0] == [*shape(CURRENT)[pool_view], "later"]


def test_several_processes_creating_the_views_at_once_all_succeed(projection_settings, engine):
    errors: list[BaseException] = []

    def create() -> None:
        other = open_engine(projection_settings)
        try:
            create_views(other)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)
        finally:
            other.dispose()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    _assert_documented_columns(engine)


def _definitions(engine: Engine) -> dict[str, str | None]:
    inspector = inspect(engine)
    return {name: inspector.get_view_definition(name) for name in inspector.get_view_names()}
