"""``tock asset-watcher``."""

from __future__ import annotations

import signal

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("asset-watcher")(asset_watcher)


def asset_watcher(ctx: typer.Context, name: str = typer.Option(
        "0", "--name", help="This watcher's name, unique among the running ones; a restart keeps it (its "
                            "transactional id: what a killed watcher left open is aborted at once).")) -> None:
    """Turn records of Kafka topics into asset events: the topics of every `AssetWatcher` a DAG's schedule
    names (re-read from the DAG definitions every 10 s).

    Each batch of records and its consumed offsets are written in one Kafka transaction, so each record is
    one asset event however often watchers are killed or restarted. Run any number, each with its own
    --name (they share the topics' partitions); the topics must be on Tock's Kafka cluster. Stops cleanly
    on SIGTERM / SIGINT.
    """
    from infra.log import Fenced
    from services.asset_watcher.shell import AssetWatcherService

    settings = settings_of(ctx)
    try:
        service = AssetWatcherService(settings, name)
    except Fenced as error:
        typer.echo(f"tock asset-watcher: {error}", err=True)
        raise typer.Exit(3) from None
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: service.stop())
    try:
        service.run()
    except Fenced as error:
        typer.echo(f"tock asset-watcher: another watcher took the name {name!r}: {error}", err=True)
        raise typer.Exit(3) from None
