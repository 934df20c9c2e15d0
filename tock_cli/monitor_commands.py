"""``tock monitor``."""

from __future__ import annotations

import signal

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("monitor")(monitor)


def monitor(ctx: typer.Context, monitor_id: str | None = typer.Option(
        None, "--id", help="This instance's id (default: host-pid-random).")) -> None:
    """Watch deadlines and keep windowed statistics: join the monitor group on tock.events.

    Writes one DeadlineMissed per run that passes its DAG's deadline (and one TaskDeadlineMissed
    per task instance that passes its task's), calls the DAGs' callbacks, and serves run and task
    durations, queue latency, failure and retry rates and adoptions (5-minute tumbling and
    hopping windows) as JSON on TOCK_MONITOR_HOST:TOCK_MONITOR_PORT (/stats, /deadlines).
    Run any number of instances; stops cleanly on SIGTERM / SIGINT.
    """
    from infra.log import Fenced
    from services.monitor.shell import Monitor
    from services.monitor.web import MonitorServer

    settings = settings_of(ctx)
    instance = Monitor(settings, monitor_id=monitor_id)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: instance.stop())
    try:
        server = MonitorServer(instance, settings.monitor_host, settings.monitor_port)
    except OSError as error:
        typer.echo(f"tock monitor: cannot serve on {settings.monitor_host}:{settings.monitor_port}: {error} "
                   "(set TOCK_MONITOR_PORT)", err=True)
        raise typer.Exit(2) from None
    server.start()
    try:
        instance.run()
    except Fenced as error:
        typer.echo(f"tock monitor: {error}", err=True)
        raise typer.Exit(3) from None
    finally:
        server.close()
