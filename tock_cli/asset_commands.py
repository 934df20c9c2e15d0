"""``tock assets``: Airflow's assets. ``event`` appends an AssetEventRecorded to the asset's partition of
tock.events (as ``POST /api/v1/assets/events`` does; its owner hands it to the DAGs scheduled on the asset);
``list`` and ``events`` read the ``asset`` and ``asset_event`` tables the projector keeps."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import typer

from tock_cli import settings_of
from tock_cli.appending import REQUEST_ID_OPTION, REQUESTED_BY, append_commands, fail, tables

assets_app = typer.Typer(help="Assets: data tasks update (their outlets) and DAGs are scheduled on; their events.",
                         no_args_is_help=True)
JSON_OPTION = typer.Option(False, "--json", help="Print JSON for scripts.")


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")


@assets_app.command("list")
def assets_list(ctx: typer.Context, search: str | None = typer.Option(None, "--search", help="Only assets whose "
                                                                        "uri or name holds this (any case)."),
                limit: int = typer.Option(1000, "--limit", min=1, help="At most this many assets."),
                as_json: bool = JSON_OPTION) -> None:
    """Each asset by uri: its events, the tasks that update it and the DAGs scheduled on it.

    An asset a DAG names (a task's outlet, its schedule) is listed before it has any event; each event
    counts once, however often it was appended."""
    from projections import queries

    with tables(ctx, "assets list") as engine:
        rows = queries.assets(engine, search=search, limit=limit)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    typer.echo(f"{'uri':40} {'events':>7} {'last event':19}  producing tasks -> consuming DAGs")
    for row in rows:
        producers = ", ".join(f"{task['dag_id']}.{task['task_id']}" for task in row["producing_tasks"]) or "-"
        typer.echo(f"{row['uri']:40} {row['event_count']:>7} {_when(row['last_event_at']):19}  {producers} -> "
                   f"{', '.join(row['consuming_dags']) or '-'}")
    if not rows:
        typer.echo("(no asset yet: a task's outlets, a DAG's schedule or `tock assets event URI` make one)")


@assets_app.command("events")
def assets_events(ctx: typer.Context, uri: str | None = typer.Option(None, "--uri", help="Of this asset only."),
                  dag_id: str | None = typer.Option(None, "--dag", help="Produced by this DAG's tries only."),
                  limit: int = typer.Option(100, "--limit", min=1, help="At most this many events."),
                  as_json: bool = JSON_OPTION) -> None:
    """Asset events, newest first: what produced each (a try, or who appended it) and the runs it triggered."""
    from projections import queries

    with tables(ctx, "assets events") as engine:
        rows = queries.asset_events(engine, uri=uri, source_dag_id=dag_id, limit=limit)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    typer.echo(f"{'when':19}  {'uri':40} {'from':32} triggered")
    for row in rows:
        runs = ", ".join(f"{run['dag_id']}/{run['run_id']}" for run in row["consumed_by"]) or "-"
        typer.echo(f"{_when(row['timestamp']):19}  {row['uri']:40} {_source(row):32} {runs}")
    if not rows:
        typer.echo("(none)")


@assets_app.command("event")
def assets_event(ctx: typer.Context, uri: str = typer.Argument(..., help="The asset's uri."),
                 extra: str = typer.Option("{}", "--extra", help="The event's extra, a JSON object."),
                 name: str = typer.Option("", "--name", help="The asset's name (default: none given)."),
                 request_id: str = REQUEST_ID_OPTION) -> None:
    """Record an update of an asset by hand, as a task's outlet would (Airflow's asset event API).

    The DAGs scheduled on it see the event. Its id is api/<request id>: running the command again with the
    same --request-id is the same event, applied once."""
    from schemas import AssetEventRecorded
    from services.api.assets import API_EVENT_PREFIX, event_problem

    extra_json = _extra_json(extra)
    problem = event_problem(uri, name, extra_json)
    if problem:
        fail("assets event", problem, code=2)
    now, event_id = time.time(), API_EVENT_PREFIX + request_id
    append_commands(settings_of(ctx), [AssetEventRecorded(uri=uri, name=name, extra_json=extra_json, event_id=event_id,
                                                          requested_by=REQUESTED_BY, timestamp=now, at=now)],
                    "assets event")
    typer.echo(f"asset {uri}: event {event_id}")


def _extra_json(extra: str) -> str:
    try:
        value: Any = json.loads(extra, parse_constant=_not_json)
    except ValueError as error:
        value = error
    if not isinstance(value, dict):
        fail("assets event", f"--extra must be a JSON object ({value})", code=2)
    return json.dumps(value, sort_keys=True)


def _not_json(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number: numbers in an extra must be finite")


def _source(row: dict[str, Any]) -> str:
    if row["source_dag_id"]:
        index = f"[{row['source_map_index']}]" if row["source_map_index"] >= 0 else ""
        return f"{row['source_dag_id']}.{row['source_task_id']}{index} ({row['source_run_id']})"
    return f"by {row['requested_by']}" if row["requested_by"] else "-"


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
