"""``tock pools``: Airflow's pool commands. ``set`` and ``delete`` append SetPool / DeletePool to the
pool's partition of tock.events (its owner grants the slots: services/scheduler/core/pools.py); ``list``
reads the ``pool`` table the projector keeps."""

from __future__ import annotations

import json
import time

import typer

from tock_cli import settings_of
from tock_cli.appending import REQUEST_ID_OPTION, REQUESTED_BY, append_commands, fail, tables

pools_app = typer.Typer(help="Pools: a global cap on the slots tries of the tasks naming them hold at once.",
                        no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(pools_app, name="pools")


@pools_app.command("set")
def pools_set(ctx: typer.Context, name: str = typer.Argument(..., help="The pool."),
              slots: int = typer.Argument(..., help="How many slots (0 grants none: the pool's tasks wait)."),
              description: str = typer.Argument("", help="What it is for."),
              request_id: str = REQUEST_ID_OPTION) -> None:
    """Create a pool or resize it (as `airflow pools set`).

    Fewer slots than are held takes none back: new grants wait until they fit. Idempotent: setting the
    same size again changes nothing."""
    from schemas import SetPool
    from schemas.pools import pool_problem

    problem = pool_problem(name, slots)
    if problem:
        fail("pools set", problem, code=2)
    append_commands(settings_of(ctx), [SetPool(pool=name, slots=slots, description=description,
                                               request_id=request_id, requested_by=REQUESTED_BY, at=time.time())],
                    "pools set")
    typer.echo(f"pool {name}: {slots} slot(s)" + (f" ({description})" if description else ""))


@pools_app.command("delete")
def pools_delete(ctx: typer.Context, name: str = typer.Argument(..., help="The pool."),
                 request_id: str = REQUEST_ID_OPTION) -> None:
    """Delete a pool (as `airflow pools delete`).

    Slots it granted stay held until their tries end; tasks that name it wait until it is set again."""
    from projections import queries
    from schemas import DeletePool
    from schemas.pools import pool_problem

    problem = pool_problem(name)
    if problem:
        fail("pools delete", problem, code=2)
    with tables(ctx, "pools delete") as engine:
        if queries.pool(engine, name) is None:
            fail("pools delete", f"no pool {name!r} in the tables (see `tock pools list`)")
    append_commands(settings_of(ctx), [DeletePool(pool=name, request_id=request_id, requested_by=REQUESTED_BY,
                                                  at=time.time())], "pools delete")
    typer.echo(f"deleting pool {name}")


@pools_app.command("list")
def pools_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")
               ) -> None:
    """Each pool: its slots, those its tries hold (occupied) and those open, and its tries holding and waiting.

    A try waiting for a grant is Airflow's scheduled state."""
    from projections import queries

    with tables(ctx, "pools list") as engine:
        rows = queries.pools(engine)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    typer.echo(f"{'pool':24} {'slots':>6} {'occupied':>9} {'open':>6} {'holding':>8} {'waiting':>8}  description")
    for row in rows:
        typer.echo(f"{row['pool']:24} {row['slots']:>6} {row['occupied_slots']:>9} {row['open_slots']:>6} "
                   f"{row['granted_tries']:>8} {row['waiting_tries']:>8}  {row['description'] or ''}")
    typer.echo("(default_pool: no cap; tasks that name no pool are in it)")
