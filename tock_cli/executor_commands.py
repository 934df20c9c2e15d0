"""``tock executors status``: queued and running tries per executor and queue, and its workers."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import typer

from projections.executor_status import read_executor_status, silence_limit
from tock_cli import settings_of
from tock_cli.query_commands import JSON_OPTION, _query, _show

executors_app = typer.Typer(help="Executors: their tries per queue and their workers' liveness.",
                            no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(executors_app, name="executors")


@executors_app.command("status")
def executors_status(ctx: typer.Context, executor: str | None = typer.Argument(
                         None, help="Only this executor (local, celery, kubernetes...)."),
                     as_json: bool = JSON_OPTION) -> None:
    """Per executor: queued and running tries per queue (a fold of the log, not a counter), its
    workers (the local executor's are the schedulers) with the age of their last heartbeat, and
    the last task heartbeat seen. A worker silent for 3 x TOCK_TASK_HEARTBEAT_SECONDS is dead."""
    settings = settings_of(ctx)
    limit = silence_limit(settings.task_heartbeat_seconds)
    status = _query(ctx, lambda engine: read_executor_status(engine, now=time.time(), limit=limit,
                                                            configured=settings.available_executors))
    if executor is not None:
        status = _only(status, executor)
    if as_json:
        typer.echo(json.dumps(status, indent=2))
        return
    _print(status)


def _only(status: list[dict[str, Any]], executor: str) -> list[dict[str, Any]]:
    chosen = [entry for entry in status if entry["executor"] == executor]
    if not chosen:
        known = ", ".join(entry["executor"] for entry in status) or "none"
        typer.echo(f"tock: no executor {executor!r}: not in TOCK_EXECUTORS, and no try or worker of it "
                   f"in the log; known: {known}", err=True)
        raise typer.Exit(1)
    return chosen


def _print(status: list[dict[str, Any]]) -> None:
    summary = [{**entry, "workers": f"{entry['workers_alive']} alive / {entry['workers_seen']} seen",
                "last_task_heartbeat": _when(entry["last_task_heartbeat"])} for entry in status]
    _show(summary, ["executor", "configured", "running", "queued", "workers", "last_task_heartbeat"], False,
          title="Executors")
    queues = [{"executor": entry["executor"], **queue} for entry in status for queue in entry["queues"]]
    _show(queues, ["executor", "queue", "running", "queued"], False, title="Tries per queue")
    workers = [{"executor": entry["executor"], **worker, "age": _age(worker["age"])}
               for entry in status for worker in entry["workers"]]
    _show(workers, ["executor", "worker", "kind", "state", "hostname", "pid", "queues", "concurrency",
                    "last_heartbeat", "age", "stopped_at"], False, title="Workers")


def _when(at: float | None) -> str | None:
    return None if at is None else dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _age(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds:.1f}s ago"
