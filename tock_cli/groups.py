"""Command groups shared by several command modules (each adds its own commands)."""

from __future__ import annotations

import typer

dags_app = typer.Typer(help="DAGs: list, trigger, pause and unpause them; backfill date ranges.", no_args_is_help=True)
runs_app = typer.Typer(help="DAG runs: list them, clear a whole run.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task instances: list, history, logs; clear, mark and kill them.", no_args_is_help=True)
commands_app = typer.Typer(help="Operator commands by request id: accepted or rejected.", no_args_is_help=True)
projections_app = typer.Typer(help="The SQL projections of the log.", no_args_is_help=True)
schedulers_app = typer.Typer(help="Scheduler instances and their liveness.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(dags_app, name="dags")
    app.add_typer(runs_app, name="runs")
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(projections_app, name="projections")
    app.add_typer(schedulers_app, name="schedulers")
    app.add_typer(commands_app, name="commands")
