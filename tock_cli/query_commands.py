"""``tock projector``, ``tock api``, ``tock dags|runs|schedulers list``, ``tock tasks list|history``,
``tock projections rebuild``."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console
from rich.table import Table as RichTable
from sqlalchemy.exc import SQLAlchemyError

from projections import queries
from projections.db import create_tables, open_engine
from schemas.decisions_view import described_decision
from schemas.values_view import described_values
from tock_cli import settings_of
from tock_cli.groups import dags_app, projections_app, runs_app, schedulers_app, tasks_app

JSON_OPTION = typer.Option(False, "--json", help="Print JSON (one array of objects) for scripts.")
LIMIT_OPTION = typer.Option(100, "--limit", min=1, help="At most this many rows.")
TIME_COLUMNS = ("at", "first_seen", "last_heartbeat", "data_interval_start", "data_interval_end")  # and *_at, *_date


def register(app: typer.Typer) -> None:
    app.command("projector")(projector)
    app.command("api")(api)


def projector(ctx: typer.Context) -> None:
    """Fold every Tock topic into the SQL tables (TOCK_DB_URL; SQLite in TOCK_HOME by default)."""
    from projections.metrics import ProjectorMetrics
    from projections.projector import run_projector
    from tock_cli.metrics import metrics_served

    settings = settings_of(ctx)
    stop = _stop_on_signals()
    metrics = ProjectorMetrics()
    try:
        with metrics_served("projector", metrics.registry, settings, settings.projector_metrics_port):
            applied = run_projector(settings, stop, metrics=metrics)
    except RuntimeError as error:
        typer.echo(f"tock projector: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"projector stopped ({applied} records applied)")


def api(ctx: typer.Context) -> None:
    """Serve the HTTP API on TOCK_API_HOST:TOCK_API_PORT (127.0.0.1:8080 by default)."""
    import uvicorn

    from services.api.app import create_app

    settings = settings_of(ctx)

    class QuietlyStoppedServer(uvicorn.Server):
        """Stopped by our own SIGTERM/SIGINT handlers (graceful, then exit 0): uvicorn's own
        would re-raise the signal after shutting down, ending the process by it."""

        def capture_signals(self):
            return contextlib.nullcontext()

    server = QuietlyStoppedServer(uvicorn.Config(create_app(settings), host=settings.api_host,
                                                 port=settings.api_port, log_level=settings.log_level.lower()))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: setattr(server, "should_exit", True))
    server.run()


@dags_app.command("list")
def dags_list(ctx: typer.Context, include_removed: bool = typer.Option(
                  False, "--all", help="Also DAGs whose file is gone or no longer defines them."),
              as_json: bool = JSON_OPTION) -> None:
    """The DAGs the DAG processor has published, as projected by `tock projector`."""
    active = None if include_removed else True
    rows = _query(ctx, lambda engine: queries.dags(engine, active=active, limit=100_000))
    if not rows and not as_json:
        typer.echo("no DAGs yet (are `tock dag-processor` and `tock projector` running?)")
        return
    _show(rows, ["dag_id", "schedule", "is_paused", "is_active", "parsed_at", "file_path"], as_json, title="DAGs")


@runs_app.command("list")
def runs_list(ctx: typer.Context, dag_id: str | None = typer.Argument(None, help="Only this DAG's runs."),
              state: str | None = typer.Option(None, help="Only runs in this state (running, success, failed)."),
              limit: int = LIMIT_OPTION, as_json: bool = JSON_OPTION) -> None:
    """DAG runs, newest first."""
    rows = _query(ctx, lambda engine: queries.runs(engine, dag_id=dag_id, state=state, limit=limit))
    _show(rows, ["dag_id", "run_id", "state", "run_type", "logical_date", "data_interval_start", "created_at",
                 "end_date", "duration", "deadline_missed_at"], as_json, title="DAG runs")


@tasks_app.command("list")
def tasks_list(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               run_id: str = typer.Argument(..., help="The run."),
               state: str | None = typer.Option(None, help="Only task instances in this state."),
               as_json: bool = JSON_OPTION) -> None:
    """The task instances of one run, with their current try."""
    rows = _query(ctx, lambda engine: queries.task_instances(engine, dag_id, run_id, state=state, limit=100_000))
    if not rows and not as_json:
        _fail_if_unknown_run(ctx, dag_id, run_id)
    _show(rows, ["task_id", "state", "try_number", "executor", "queue", "handle", "hostname", "start_date",
                 "end_date", "scheduler_id"], as_json, title=f"{dag_id} / {run_id}")


@tasks_app.command("history")
def tasks_history(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
                  run_id: str = typer.Argument(..., help="The run."),
                  task_id: str = typer.Argument(..., help="The task."), as_json: bool = JSON_OPTION,
                  map_index: int | None = typer.Option(None, "--map-index", help="Of a mapped task: only the events of "
                                                       "this instance and of the task as a whole (its expansion).")
                  ) -> None:
    """Every event of one task instance, in log order (including those of old tries); of a mapped task,
    those of every instance (``map_index``) unless --map-index names one."""
    rows = _query(ctx, lambda engine: queries.task_history(engine, dag_id, run_id, task_id, limit=100_000,
                                                           map_index=map_index))
    if not rows:
        typer.echo(f"tock: no events of task {task_id} in {dag_id} / {run_id}", err=True)
        raise typer.Exit(1)
    rows = [_history_line(row) for row in rows]
    mapped = any(row.get("map_index") not in (None, -1) for row in rows)  # a map index column only where one is
    columns = ["offset", "event_type", *(["map_index"] if mapped or as_json else []), "try_number", "at", "why",
               "values", "payload"]
    _show(rows, columns, as_json, title=f"{dag_id} / {run_id} / {task_id}")


def _history_line(row: dict[str, Any]) -> dict[str, Any]:
    """A history row with its values and, for a decision (a skip, an upstream failure, an empty task's
    success, a skipped try, a branch's success), why in words: reason, trigger rule, upstream states,
    the branch that chose, what it followed."""
    payload = row.get("payload") or {}
    return {**row, "why": described_decision(row["event_type"], payload),
            "values": described_values(row["event_type"], payload)}


@schedulers_app.command("list")
def schedulers_list(ctx: typer.Context, state: queries.SchedulerState | None = typer.Option(
                        None, help="Only schedulers in this state: alive, dead (no heartbeat for longer than "
                                   "TOCK_SCHEDULER_SESSION_TIMEOUT, never stopped) or stopped."),
                    limit: int = LIMIT_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Scheduler instances by id, with their partitions and last heartbeat.

    A scheduler silent for longer than the session timeout without a clean stop is dead.
    """
    silence_limit = queries.scheduler_silence_limit(settings_of(ctx))
    rows = _query(ctx, lambda engine: queries.schedulers(engine, now=time.time(), silence_limit=silence_limit,
                                                         state=state, limit=limit))
    _show(rows, ["scheduler_id", "state", "hostname", "pid", "partitions", "last_heartbeat", "first_seen",
                 "stopped_at"], as_json, title="Schedulers")


@projections_app.command("rebuild")
def projections_rebuild(ctx: typer.Context, verify: bool = typer.Option(
        False, "--verify", help="Do not swap: fold the log up to the live tables' offsets and compare them "
                                "row for row; exit 1 on any difference.")) -> None:
    """Replay every topic from offset 0 into fresh tables and swap them in (or --verify the live ones)."""
    from projections.contract.views import ViewInUse
    from projections.rebuild import rebuild
    from projections.rebuild import verify as verify_tables

    engine = open_engine(settings_of(ctx))
    try:
        if verify:
            _report_verification(verify_tables(settings_of(ctx), engine))
        else:
            reached = rebuild(settings_of(ctx), engine)
            typer.echo(f"rebuilt the projections from {sum(reached.values())} log positions and swapped them in")
    except ViewInUse as error:
        typer.echo(f"tock projections rebuild: {error}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()


WRITE_OPTION = typer.Option(False, "--write", help="Write the Markdown to --docs and record each version's declared "
                                                    "shape in projections/contract/v<N>.json; refuses (exit 1) a "
                                                    "change that does not only grow.")


@projections_app.command("contract")
def projections_contract(write: bool = WRITE_OPTION, docs: str = typer.Option(
        "docs/tables.md", "--docs", help="With --write: where the Markdown goes.")) -> None:
    """Print the tables integrators may query (the versioned views tock_v<N>_<table>) as Markdown."""
    from pathlib import Path

    from projections.contract.docs import render
    from projections.contract.frozen import record_growth

    if not write:
        typer.echo(render(), nl=False)
        return
    refusals = record_growth()
    if refusals:
        for line in refusals:
            typer.echo(f"tock projections contract: {line}", err=True)
        raise typer.Exit(1)
    Path(docs).write_text(render())
    typer.echo(f"wrote {docs} and the frozen shape of each version")


def _report_verification(differences: list[str]) -> None:
    if not differences:
        typer.echo("verified: the live tables equal the log folded up to their offsets")
        return
    typer.echo(f"the live tables differ from the log ({len(differences)} difference(s) shown):", err=True)
    for line in differences:
        typer.echo(f"  {line}", err=True)
    raise typer.Exit(1)


def _query(ctx: typer.Context, read) -> list[dict[str, Any]]:
    engine = open_engine(settings_of(ctx))
    try:
        create_tables(engine)  # a fresh database answers with empty lists rather than an error
        return read(engine)
    except SQLAlchemyError as error:
        typer.echo(f"tock: cannot read the projections database: {error.__class__.__name__}: {error.orig or error}",
                   err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()


def _fail_if_unknown_run(ctx: typer.Context, dag_id: str, run_id: str) -> None:
    if _query(ctx, lambda engine: queries.run(engine, dag_id, run_id)) is None:
        typer.echo(f"tock: no run {run_id} of DAG {dag_id} (see `tock runs list {dag_id}`)", err=True)
        raise typer.Exit(1)


def _show(rows: list[dict[str, Any]], columns: Sequence[str], as_json: bool, *, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    table = RichTable(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(column, row.get(column)) for column in columns))
    console = Console()
    if not console.is_terminal:  # scripts and pipes get whole values, not ellipses
        console = Console(width=max(console.width, 240))
    console.print(table)
    if not rows:
        typer.echo("(none)")


def _cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column == "duration":
        return f"{value:.1f} s"
    if isinstance(value, float) and (column.endswith(("_date", "_at")) or column in TIME_COLUMNS):
        return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop
