"""Command groups shared by several command modules (each adds its own commands)."""

from __future__ import annotations

import typer

dags_app = typer.Typer(help="DAGs: list them, trigger runs.", no_args_is_help=True)
runs_app = typer.Typer(help="DAG runs.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task instances and their history.", no_args_is_help=True)
projections_app = typer.Typer(help="The SQL projections of the log.", no_args_is_help=True)
schedulers_app = typer.Typer(help="Scheduler instances and their liveness.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(dags_app, name="dags")
    app.add_typer(runs_app, name="runs")
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(projections_app, name="projections")
    app.add_typer(schedulers_app, name="schedulers")
