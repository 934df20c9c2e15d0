"""``tock broker ...`` and ``tock topics create``."""

from __future__ import annotations

import typer
from confluent_kafka.admin import AdminClient

from infra.broker import BrokerError, LocalKafkaBroker
from infra.topics import TopicMismatch, ensure_topics
from tock.cli import settings_of

broker_app = typer.Typer(help="The local development Kafka broker (single node, KRaft).", no_args_is_help=True)
topics_app = typer.Typer(help="Tock's Kafka topics.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")
    app.add_typer(topics_app, name="topics")


def _local_broker(ctx: typer.Context) -> LocalKafkaBroker:
    settings = settings_of(ctx)
    if not settings.uses_local_broker:
        typer.echo(f"TOCK_KAFKA_BOOTSTRAP is set ({settings.kafka_bootstrap}): no local broker is used")
        raise typer.Exit(0)
    return LocalKafkaBroker(settings)


@broker_app.command("start")
def broker_start(ctx: typer.Context) -> None:
    """Start the local broker (fetching its jars on first use) and wait until it is ready."""
    broker = _local_broker(ctx)
    try:
        status = broker.start()
    except BrokerError as error:
        typer.echo(f"tock broker: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"broker {status.describe()}")


@broker_app.command("stop")
def broker_stop(ctx: typer.Context) -> None:
    """Stop the local broker cleanly; its data stays for the next start."""
    stopped = _local_broker(ctx).stop()
    typer.echo("broker stopped" if stopped else "broker was not running")


@broker_app.command("status")
def broker_status(ctx: typer.Context) -> None:
    """Say whether the local broker runs and accepts connections (exit 3 when stopped)."""
    status = _local_broker(ctx).status()
    typer.echo(f"broker {status.describe()}")
    if not status.ready:
        raise typer.Exit(3)


@topics_app.command("create")
def topics_create(ctx: typer.Context) -> None:
    """Create Tock's topics if missing; fail if existing ones differ (idempotent)."""
    settings = settings_of(ctx)
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    try:
        created = ensure_topics(admin, settings.topic_prefix, settings.partitions,
                                log_retention_hours=settings.task_log_retention_hours)
    except (TopicMismatch, RuntimeError) as error:
        typer.echo(f"tock topics: {error}", err=True)
        raise typer.Exit(1) from None
    for name in created:
        typer.echo(f"created {name}")
    typer.echo(f"topics ready ({settings.partitions} partitions, prefix {settings.topic_prefix!r})")
