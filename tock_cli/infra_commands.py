"""``tock broker ...`` and ``tock topics create``."""

from __future__ import annotations

from typing import NoReturn

import typer
from confluent_kafka.admin import AdminClient

from infra.broker import BrokerError, LocalKafkaBroker
from infra.registry import RegistryError, register_all
from infra.settings import MAX_BROKER_NODES
from infra.topics import TopicMismatch, ensure_topics
from schemas.wire import subject
from tock_cli import settings_of

broker_app = typer.Typer(help="The local development Kafka broker (KRaft; one node or a loopback cluster).",
                         no_args_is_help=True)
topics_app = typer.Typer(help="Tock's Kafka topics.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")
    app.add_typer(topics_app, name="topics")


def _local_broker(ctx: typer.Context, nodes: int | None = None) -> LocalKafkaBroker:
    settings = settings_of(ctx)
    if not settings.uses_local_broker:
        typer.echo(f"TOCK_KAFKA_BOOTSTRAP is set ({settings.kafka_bootstrap}): no local broker is used")
        raise typer.Exit(0)
    try:
        return LocalKafkaBroker(settings, nodes)
    except BrokerError as error:
        _fail(error)


def _fail(error: BrokerError) -> NoReturn:
    typer.echo(f"tock broker: {error}", err=True)
    raise typer.Exit(1) from None


NODES = typer.Option(None, "--nodes", min=1, max=MAX_BROKER_NODES,
                     help="node count of a new local broker (KRaft cluster on loopback, node i on "
                          "TOCK_BROKER_PORT + i-1); an existing one remembers its count")
NODE = typer.Option(None, "--node", help="only this node, numbered 1..N like Kafka's node.id")


@broker_app.command("start")
def broker_start(ctx: typer.Context, nodes: int | None = NODES, node: int | None = NODE,
                 timeout: float = typer.Option(180.0, "--timeout", min=1.0,
                                               help="seconds to wait for each node to accept connections")) -> None:
    """Start the local broker (fetching its jars on first use) and wait until it is ready."""
    broker = _local_broker(ctx, nodes)
    try:
        if node is not None:
            typer.echo(f"broker node {node} {broker.start_node(node, timeout).describe()}")
            return
        status = broker.start(timeout)
    except BrokerError as error:
        _fail(error)
    typer.echo(f"broker {status.describe()}")


@broker_app.command("stop")
def broker_stop(ctx: typer.Context, node: int | None = NODE) -> None:
    """Stop the local broker (every node, or one) cleanly; its data stays for the next start."""
    broker = _local_broker(ctx)
    try:
        stopped = broker.stop() if node is None else broker.stop_node(node)
    except BrokerError as error:
        _fail(error)
    what = "broker" if node is None else f"broker node {node}"
    typer.echo(f"{what} stopped" if stopped else f"{what} was not running")


@broker_app.command("status")
def broker_status(ctx: typer.Context) -> None:
    """Say whether each node runs and accepts connections (exit 3 unless every node is ready)."""
    status = _local_broker(ctx).status()
    typer.echo(f"broker {status.describe()}")
    if not status.ready:
        raise typer.Exit(3)


@topics_app.command("create")
def topics_create(ctx: typer.Context) -> None:
    """Create Tock's topics if missing; fail if existing ones differ; bring existing tock.events and
    tock.heartbeats to LogAppendTime (idempotent)."""
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
    if settings.schema_registry_url is not None:
        try:
            registered = register_all(settings)
        except RegistryError as error:
            typer.echo(f"tock topics: {error}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"schemas registered at {settings.schema_registry_url}: "
                   + ", ".join(f"{subject(name)} id {schema_id}" for name, schema_id in registered.items()))
