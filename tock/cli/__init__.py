"""The ``tock`` command. Settings are read once here and handed to each command."""

from __future__ import annotations

import faulthandler
import importlib
import logging
import signal
import sys

import typer

from infra.settings import Settings, SettingsError, load_settings

app = typer.Typer(
    name="tock",
    help="Tock: a workflow scheduler whose truth is a Kafka log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module adds its commands through register(app). Listed, not discovered, so a
# missing module is an import error rather than a silently missing command.
COMMAND_MODULES = [
    "tock.cli.groups",
    "tock.cli.infra_commands",
    "tock.cli.kube_commands",
    "tock.cli.dag_commands",
    "tock.cli.query_commands",
    "tock.cli.scheduler_commands",
    "tock.cli.operator_commands",
    "tock.cli.backfill_commands",
    "tock.cli.worker_commands",
    "tock.cli.executor_commands",
    "tock.cli.node_agent_commands",
]


@app.callback()
def _load(ctx: typer.Context) -> None:
    """Read TOCK_* settings once; every command receives them as ctx.obj."""
    try:
        settings = load_settings()
    except SettingsError as error:
        typer.echo(f"tock: {error}", err=True)
        raise typer.Exit(2) from None
    configure_logging(settings)
    ctx.obj = settings


def configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def settings_of(ctx: typer.Context) -> Settings:
    return ctx.find_root().obj


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a live
    # service is stuck without stopping it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    app()
