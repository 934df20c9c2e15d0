"""``tock worker``: a Celery worker that runs tries sent by the Celery executor."""

from __future__ import annotations

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)


def worker(ctx: typer.Context,
           queues: str | None = typer.Option(None, "--queues", "-q",
                                                help="Queues to consume, comma-separated (default: "
                                                     "TOCK_CELERY_DEFAULT_QUEUE)."),
           concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, help="Tries run at once."),
           hostname: str | None = typer.Option(None, "--hostname", "-n",
                                                  help="This worker's host name: its Celery node name is "
                                                       "tock@NAME and its runners' ids name NAME (default: "
                                                       "TOCK_HOSTNAME or the machine's).")) -> None:
    """Run tries on this host for the Celery executor (Celery 5 over Redis, TOCK_CELERY_BROKER_URL).

    Each try is run with `tock run-task` rules: claimed through the log (a try delivered twice
    runs once), supervised, heartbeating and reporting straight to Kafka. Messages are
    acknowledged after their try ends. SIGTERM: warm shutdown (running tries finish first);
    a second SIGTERM stops at once, and the tries still running end failed.
    """
    from services.worker.run import WorkerOptions, run_worker

    settings = settings_of(ctx)
    if hostname:
        settings = settings.model_copy(update={"hostname": hostname})
    chosen = [queue.strip() for queue in (queues or settings.celery_default_queue).split(",") if queue.strip()]
    if not chosen:
        typer.echo("tock worker: --queues names no queue", err=True)
        raise typer.Exit(2)
    raise typer.Exit(run_worker(settings, WorkerOptions(tuple(chosen), concurrency)))
