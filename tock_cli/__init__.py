"""The ``tock`` command. Settings are read once here and handed to each command."""

from __future__ import annotations

import faulthandler
import importlib
import logging
import signal
import sys

import typer

from infra.settings import Settings, SettingsError, load_settings

_app = typer.Typer(
    name="tock",
    help="Tock: a workflow scheduler whose truth is a Kafka log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module adds its commands through register(app). Listed, not discovered, so a
# missing module is an import error rather than a silently missing command.
COMMAND_MODULES = [
    "tock_cli.groups",
    "tock_cli.infra_commands",
    "tock_cli.kube_commands",
    "tock_cli.dag_commands",
    "tock_cli.query_commands",
    "tock_cli.scheduler_commands",
    "tock_cli.monitor_commands",
    "tock_cli.lineage_commands",
    "tock_cli.runner_commands",
    "tock_cli.operator_commands",
    "tock_cli.backfill_commands",
    "tock_cli.worker_commands",
    "tock_cli.executor_commands",
    "tock_cli.node_agent_commands",
    "tock_cli.user_commands",
    "tock_cli.local_commands",
    "tock_cli.secret_commands",
    "tock_cli.pool_commands",
    "tock_cli.asset_commands",
    "tock_cli.asset_watcher_commands",
    "tock_cli.port_commands",
    "tock_cli.schema_commands",
]


# The modules that register each top-level command: `tock <command> ...` imports only those, so a
# process pays for what its command needs (`tock run-task` starts for every try, in every pod; a
# scheduler needs neither sqlalchemy nor kubernetes nor rich). A group whose subcommands several
# modules add lists them all, so `tock dags --help` shows each. Anything else (`tock --help`, a
# typo) registers every module. tests/unit/test_cli_commands.py checks this table against them.
_GROUPS = ["tock_cli.groups", "tock_cli.query_commands", "tock_cli.scheduler_commands",
           "tock_cli.operator_commands", "tock_cli.backfill_commands", "tock_cli.local_commands"]
COMMANDS: dict[str, list[str]] = {
    "broker": ["tock_cli.infra_commands"],
    "topics": ["tock_cli.infra_commands"],
    "kube": ["tock_cli.kube_commands"],
    "dag-processor": ["tock_cli.dag_commands"],
    "projector": ["tock_cli.query_commands"],
    "api": ["tock_cli.query_commands"],
    "scheduler": ["tock_cli.scheduler_commands"],
    # It starts those services whose commands are registered: all of them.
    "standalone": COMMAND_MODULES,
    "run-task": ["tock_cli.runner_commands"],
    "worker": ["tock_cli.worker_commands"],
    "executors": ["tock_cli.executor_commands"],
    "node-agent": ["tock_cli.node_agent_commands"],
    "users": ["tock_cli.user_commands"],
    "monitor": ["tock_cli.monitor_commands"],
    "lineage": ["tock_cli.lineage_commands"],
    "tokens": ["tock_cli.user_commands"],
    "variables": ["tock_cli.secret_commands"],
    "connections": ["tock_cli.secret_commands"],
    "pools": ["tock_cli.pool_commands"],
    "assets": ["tock_cli.asset_commands"],
    "asset-watcher": ["tock_cli.asset_watcher_commands"],
    "port": ["tock_cli.port_commands"],
    "schemas": ["tock_cli.schema_commands"],
    **dict.fromkeys(["dags", "runs", "tasks", "commands", "projections", "schedulers"], _GROUPS),
}
_registered: set[str] = set()


def _register(modules: list[str]) -> typer.Typer:
    for module in modules:
        if module not in _registered:
            importlib.import_module(module).register(_app)
            _registered.add(module)
    return _app


def __getattr__(name: str):
    # ``from tock_cli import app``: the whole command line, every command registered.
    if name == "app":
        return _register(COMMAND_MODULES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@_app.callback()
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


def main() -> None:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a live
    # service is stuck without stopping it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    _register(COMMANDS.get(command, COMMAND_MODULES))()
