"""``tock dag-processor`` and ``tock dags list``."""

from __future__ import annotations

import logging
import signal
from datetime import datetime, timezone

import typer

from infra.settings import Settings
from tock.cli import settings_of
from tock.cli.groups import dags_app

log = logging.getLogger("tock.dag_processor")


def register(app: typer.Typer) -> None:
    app.command("dag-processor")(dag_processor)


def dag_processor(ctx: typer.Context) -> None:
    """Parse the DAG files of TOCK_DAGS_FOLDER continuously and publish their definitions.

    Each changed file is parsed in a child process (TOCK_PARSE_PARALLELISM at once, each
    within TOCK_PARSE_TIMEOUT seconds); the folder is scanned every TOCK_DAG_SCAN_INTERVAL
    seconds. Stops cleanly on SIGTERM / SIGINT.
    """
    settings = settings_of(ctx)
    folder = settings.resolved_dags_folder
    if not folder.is_dir():
        typer.echo(f"tock dag-processor: the DAGs folder {folder} does not exist "
                   "(set TOCK_DAGS_FOLDER or create it)", err=True)
        raise typer.Exit(2)
    from infra.log import KafkaEventLog
    from services.dag_processor.recovery import known_dags
    from services.dag_processor.shell import DagProcessor

    event_log = KafkaEventLog(settings, client_id="tock-dag-processor")
    try:
        processor = DagProcessor(settings, event_log, state=known_dags(settings))
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: processor.stop())
        processor.run()
    finally:
        event_log.close()


@dags_app.command("list")
def dags_list(ctx: typer.Context) -> None:
    """List the DAGs the DAG processor has published (read from the tock.dags topic)."""
    from services.dag_processor.recovery import latest_definitions

    settings = settings_of(ctx)
    try:
        definitions = latest_definitions(settings, timeout=10.0)
    except Exception as error:  # noqa: BLE001 - report any broker problem plainly
        typer.echo(f"tock dags list: cannot read the DAGs from Kafka at {settings.bootstrap}: {error}", err=True)
        raise typer.Exit(1) from None
    if not definitions:
        typer.echo("no DAGs (is `tock dag-processor` running on TOCK_DAGS_FOLDER?)")
        return
    _print_table(settings, [parsed for _, parsed in sorted(definitions.items())])


def _print_table(settings: Settings, parsed: list) -> None:
    rows = [("DAG", "SCHEDULE", "TASKS", "PARSED AT", "FILE")]
    for event in parsed:
        definition = event.definition
        at = datetime.fromtimestamp(event.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        rows.append((event.dag_id, definition.schedule or "-", str(len(definition.tasks)), at, event.file_path))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
