"""``tock scheduler``, ``tock run-task``, ``tock dags trigger`` and ``tock standalone``."""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

import typer
from confluent_kafka import KafkaException

from tock_cli import settings_of
from tock_cli.appending import ATTEMPTS, REQUEST_ID_OPTION, wait_for_run
from tock_cli.groups import dags_app

log = logging.getLogger("tock_cli")


def register(app: typer.Typer) -> None:
    app.command("scheduler")(scheduler)
    app.command("standalone")(standalone)


def scheduler(ctx: typer.Context, scheduler_id: str | None = typer.Option(
        None, "--id", help="This instance's id (default: host-pid-random).")) -> None:
    """Schedule DAG runs: join the scheduler group on tock.events and own some of its partitions.

    Run any number of instances; each replays the partitions it is assigned, adopts their
    living tries and launches new ones on their executors (TOCK_EXECUTORS). Stops cleanly on
    SIGTERM / SIGINT.
    """
    from infra.executors import build_executors
    from infra.log import Fenced
    from services.runner import local_launcher_command
    from services.scheduler.metrics import SchedulerMetrics
    from services.scheduler.shell import Scheduler
    from tock_cli.metrics import metrics_served

    settings = settings_of(ctx)
    metrics = SchedulerMetrics()
    with metrics_served("scheduler", metrics.registry, settings, settings.scheduler_metrics_port):
        executors = build_executors(settings, local_launcher=local_launcher_command())
        instance = Scheduler(settings, executors, scheduler_id=scheduler_id, metrics=metrics)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: instance.stop())
        try:
            instance.run()
        except Fenced as error:
            typer.echo(f"tock scheduler: {error}", err=True)
            raise typer.Exit(3) from None


@dags_app.command("trigger")
def dags_trigger(ctx: typer.Context,
                 dag_id: str = typer.Argument(..., help="The DAG to run."),
                 conf: str = typer.Option("{}", help="Run configuration, a JSON object."),
                 logical_date: str | None = typer.Option(
                     None, "--logical-date", "-l", help="The run's logical date: ISO 8601, e.g. 2024-01-31 or "
                                                        "2024-01-31T06:00:00+02:00 (no offset: UTC). Default: now."),
                 wait: bool = typer.Option(False, "--wait", help="Wait for the run to finish; exit 1 if it fails."),
                 timeout: float | None = typer.Option(None, help="With --wait: give up after this many seconds "
                                                                    "(exit 2)."),
                 request_id: str = REQUEST_ID_OPTION) -> None:
    """Ask the scheduler for a manual run of DAG_ID; prints the run id (manual__<request id>: the
    same --request-id names the same run, created once)."""
    from schemas.params import problems
    from services.scheduler.trigger import published_definition

    try:
        if not isinstance(json.loads(conf), dict):
            raise ValueError("not an object")
    except ValueError as error:
        typer.echo(f"tock dags trigger: --conf must be a JSON object ({error})", err=True)
        raise typer.Exit(2) from None
    logical = logical_date_option(logical_date)
    settings = settings_of(ctx)
    try:
        published = published_definition(settings, dag_id)
    except (KafkaException, RuntimeError) as error:
        _cannot_append(settings, error)
    if not published:
        typer.echo(f"tock dags trigger: no DAG {dag_id!r} has been published (see `tock dags list`; is "
                   "`tock dag-processor` running on the folder that defines it?)", err=True)
        raise typer.Exit(1)
    refused = problems(published.params_json, conf)
    if refused:
        typer.echo(f"tock dags trigger: --conf does not fit the params of DAG {dag_id}: " + "; ".join(refused),
                   err=True)
        raise typer.Exit(2)
    run_id, start = _trigger(settings, dag_id, request_id, conf, logical)
    typer.echo(run_id)
    if not wait:
        return
    state = wait_for_run(settings, dag_id, run_id, start, timeout)
    if state is None:
        typer.echo(f"tock dags trigger: run {run_id} did not finish within {timeout:g} s", err=True)
        raise typer.Exit(2)
    typer.echo(f"run {run_id}: {state}")
    raise typer.Exit(0 if state == "success" else 1)


def logical_date_option(text: str | None) -> float | None:
    """``--logical-date`` as seconds since the epoch (None: not given); a bad date exits 2 naming it."""
    from schemas.schedule import parse_date

    if text is None:
        return None
    try:
        return parse_date(text)
    except ValueError as error:
        typer.echo(f"tock dags trigger: --logical-date: {error}", err=True)
        raise typer.Exit(2) from None


def _trigger(settings, dag_id: str, request_id: str, conf: str, logical_date: float | None) -> tuple[str, int]:
    """Append the trigger, retrying a delivery failure with the same request id (the scheduler creates
    the run once)."""
    from services.scheduler.trigger import trigger_run

    for attempt in range(1, ATTEMPTS + 1):
        try:
            return trigger_run(settings, dag_id, request_id, conf, logical_date=logical_date)
        except (KafkaException, RuntimeError) as error:
            if attempt == ATTEMPTS:
                _cannot_append(settings, error, f"; run it again with --request-id {request_id} (it is applied once)")
            typer.echo(f"tock dags trigger: the log did not acknowledge the trigger ({error}); retrying with the "
                       f"same request id ({attempt + 1}/{ATTEMPTS})", err=True)
            time.sleep(attempt)
    raise AssertionError("unreachable")


def _cannot_append(settings, error: Exception, hint: str = "") -> None:
    typer.echo(f"tock dags trigger: cannot append the trigger to Kafka at {settings.bootstrap}: {error} "
               f"(is the broker up, and were the topics created with `tock topics create`?){hint}", err=True)
    raise typer.Exit(1) from None


def standalone(ctx: typer.Context, dags_folder: Path | None = typer.Option(
        None, "--dags-folder", file_okay=False, help="DAG files (default: TOCK_DAGS_FOLDER or <home>/dags).")) -> None:
    """Everything on one machine: the local broker (unless TOCK_KAFKA_BOOTSTRAP is set), the topics,
    the DAG processor, the scheduler and, when installed, the projector and the API.

    Ctrl-C or SIGTERM stops every service cleanly.
    """
    from tock_cli.standalone import Standalone, StandaloneError

    settings = settings_of(ctx)
    commands = {command.name for command in ctx.find_root().command.commands.values()} \
        if hasattr(ctx.find_root().command, "commands") else set()
    folder = (dags_folder or settings.resolved_dags_folder).resolve()
    try:
        code = Standalone(settings, folder, available=commands).run()
    except StandaloneError as error:
        typer.echo(f"tock standalone: {error}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)

