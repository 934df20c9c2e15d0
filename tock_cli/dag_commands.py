"""``tock dag-processor``."""

from __future__ import annotations

import signal

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("dag-processor")(dag_processor)


def dag_processor(ctx: typer.Context) -> None:
    """Parse the DAG files of TOCK_DAGS_FOLDER continuously and publish their definitions.

    Each file is parsed in a child process (TOCK_PARSE_PARALLELISM at once, each within
    TOCK_PARSE_TIMEOUT seconds) when it is new or changed, at once when a DAGs-folder module
    it imported changes, again every TOCK_DAG_FORCED_REPARSE_EVERY x TOCK_DAG_REPARSE_INTERVAL
    seconds while nothing it imports changed, and after a failure with backoff (from
    TOCK_PARSE_RETRY_BACKOFF); a changed helper module (a .py file defining no DAG)
    re-parses the folder. The folder is scanned every TOCK_DAG_SCAN_INTERVAL seconds.
    Stops cleanly on SIGTERM / SIGINT.
    """
    settings = settings_of(ctx)
    folder = settings.resolved_dags_folder
    if not folder.is_dir():
        typer.echo(f"tock dag-processor: the DAGs folder {folder} does not exist "
                   "(set TOCK_DAGS_FOLDER or create it)", err=True)
        raise typer.Exit(2)
    from infra.log import KafkaEventLog
    from infra.topics import DAGS_MAX_BYTES
    from services.dag_processor.metrics import DagProcessorMetrics
    from services.dag_processor.recovery import known_dags
    from services.dag_processor.shell import DagProcessor
    from tock_cli.metrics import metrics_served

    metrics = DagProcessorMetrics()
    with metrics_served("dag-processor", metrics.registry, settings, settings.dag_processor_metrics_port):
        event_log = KafkaEventLog(settings, client_id="tock-dag-processor",
                                  config={"message.max.bytes": DAGS_MAX_BYTES})  # a big DAG's definition
        try:
            processor = DagProcessor(settings, event_log, state=known_dags(settings), metrics=metrics)
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: processor.stop())
            processor.run()
        finally:
            event_log.close()
