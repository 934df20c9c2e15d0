"""``tock lineage``."""

from __future__ import annotations

import signal

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("lineage")(lineage)


def lineage(ctx: typer.Context, name: str = typer.Option(
        "0", "--name", help="This emitter's name, unique among the running ones; a restart keeps it (Kafka: its "
                            "transactional id, so what a killed emitter left open is aborted at once; HTTP: its "
                            "record of what was accepted).")) -> None:
    """Emit the log as OpenLineage run events (START, RUNNING, COMPLETE, FAIL, ABORT of DAG runs and tries,
    with parent run, error message and asset datasets) through openlineage-python's transports.

    TOCK_LINEAGE_TRANSPORT: kafka (the topic TOCK_LINEAGE_TOPIC, exactly once for read_committed readers, any
    number of emitters), file (TOCK_LINEAGE_FILE, JSON lines, exactly once, one emitter per file) or http
    (TOCK_LINEAGE_URL, at least once, each repeat the same bytes). Stops cleanly on SIGTERM / SIGINT.
    """
    from infra.log import Fenced
    from services.lineage.config import LineageSettingsError
    from services.lineage.local_sinks import SinkBusy
    from services.lineage.shell import lineage_service

    settings = settings_of(ctx)
    try:
        service = lineage_service(settings, name)
    except (LineageSettingsError, SinkBusy) as error:
        typer.echo(f"tock lineage: {error}", err=True)
        raise typer.Exit(2) from None
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: service.stop())
    try:
        service.run()
    except Fenced as error:
        typer.echo(f"tock lineage: another emitter took the name {name!r}: {error}", err=True)
        raise typer.Exit(3) from None
