"""``tock dags backfill``, ``tock dags backfill-cancel`` and ``tock tasks logs``."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import astuple, replace

import typer
from confluent_kafka import KafkaException

from projections import queries
from schemas import CancelBackfill, RequestBackfill
from services.api import targets
from services.api.task_logs import TryRef, file_chunks, log_file, shipped_texts, try_has_ended, try_start
from tock_cli import settings_of
from tock_cli.appending import REQUEST_ID_OPTION, REQUESTED_BY, append_commands, date_option, fail, tables
from tock_cli.groups import dags_app, tasks_app

ENDED = ("success", "failed", "cancelled", "rejected")
WAIT_POLL = 1.0


def register(_app: typer.Typer) -> None:
    """Commands are added to the shared groups when this module is imported."""


@dags_app.command("backfill")
def dags_backfill(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
                  start_date: float = date_option("--start-date", "The first logical date.", required=True),
                  end_date: float = date_option("--end-date", "The last logical date (included).", required=True),
                  reprocess_failed: bool = typer.Option(False, "--reprocess-failed",
                                                        help="Also re-run dates whose run failed."),
                  conf: str = typer.Option("{}", help="Conf of the runs it creates, a JSON object."),
                  wait: bool = typer.Option(False, "--wait", help="Show progress until the backfill ends; exit 1 "
                                                                  "unless it succeeds. Ctrl-C cancels it."),
                  request_id: str = REQUEST_ID_OPTION) -> None:
    """Create the runs of every schedule interval with a logical date in [--start-date, --end-date].

    Dates that already have a run are left alone (with --reprocess-failed a failed run is reopened
    and its failed tasks cleared). Runs are created as the DAG's max_active_runs allows. Prints the
    backfill id (its request id).
    """
    if end_date < start_date:
        fail("dags backfill", f"--end-date ({targets.iso(end_date)}) is before --start-date "
                              f"({targets.iso(start_date)})", code=2)
    conf_json = _conf_json(conf)
    with tables(ctx, "dags backfill") as engine:
        dag = targets.known_dag(engine, dag_id, active=True)
        targets.backfill_range(dag, start_date, end_date)
        _conf_fits(dag, conf_json)
    event = RequestBackfill(dag_id=dag_id, request_id=request_id, start_date=start_date, end_date=end_date,
                            reprocess_failed=reprocess_failed, conf_json=conf_json, requested_by=REQUESTED_BY,
                            at=time.time())
    append_commands(settings_of(ctx), [event], "dags backfill")
    typer.echo(request_id)
    if wait:
        raise typer.Exit(_wait_for_backfill(ctx, dag_id, request_id))


def _conf_fits(dag: dict, conf_json: str) -> None:
    try:
        targets.conf_fits(dag, json.loads(conf_json))
    except targets.Refused as refused:
        fail("dags backfill", refused.reason, code=2)


def _conf_json(conf: str) -> str:
    try:
        value = json.loads(conf)
    except ValueError as error:
        value = error
    if not isinstance(value, dict):
        fail("dags backfill", f"--conf must be a JSON object ({value})", code=2)
    return json.dumps(value, sort_keys=True)


def _wait_for_backfill(ctx: typer.Context, dag_id: str, backfill_id: str) -> int:
    """Print progress until the backfill ends; on Ctrl-C append CancelBackfill. Returns the exit code."""
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        row = _follow_backfill(ctx, dag_id, backfill_id, interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
    if row is None:  # interrupted
        append_commands(settings_of(ctx), [CancelBackfill(dag_id=dag_id, backfill_id=backfill_id,
                                                          requested_by=REQUESTED_BY, at=time.time())],
                        "dags backfill")
        typer.echo(f"interrupted: cancelled backfill {backfill_id} (it creates no more runs; runs already "
                   "created go on)", err=True)
        return 130
    if row["state"] == "rejected":
        typer.echo(f"backfill {backfill_id} was rejected: {row['reason']}", err=True)
    typer.echo(f"backfill {backfill_id}: {row['state']}")
    return 0 if row["state"] == "success" else 1


def _follow_backfill(ctx: typer.Context, dag_id: str, backfill_id: str, interrupted: threading.Event):
    """The backfill's row once it has ended, or None when interrupted first."""
    shown, started = None, time.monotonic()
    with tables(ctx, "dags backfill") as engine:
        while not interrupted.is_set():
            row = queries.backfill(engine, dag_id, backfill_id)
            line = _progress(row, time.monotonic() - started)
            if line != shown:
                typer.echo(line, err=True)
                shown = line
            if row is not None and row["state"] in ENDED:
                return row
            interrupted.wait(WAIT_POLL)
    return None


def _progress(row, waited: float) -> str:
    if row is None or row["planned"] is None:
        hint = " (is `tock projector` running?)" if waited > 10 and row is None else ""
        return f"waiting for the scheduler to plan the backfill{hint}"
    return f"created {row['created']} / finished {row['finished']} of {row['planned']}"


@dags_app.command("backfill-cancel")
def dags_backfill_cancel(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
                         backfill_id: str = typer.Argument(..., help="The backfill (its request id).")) -> None:
    """Stop a backfill from creating more runs; runs it created go on. (Idempotent: carries no request id.)"""
    with tables(ctx, "dags backfill-cancel") as engine:
        targets.known_dag(engine, dag_id)
        row = queries.backfill(engine, dag_id, backfill_id)
    if row is None:
        fail("dags backfill-cancel", f"no backfill {backfill_id} of DAG {dag_id}")
    if row["state"] in ENDED:
        fail("dags backfill-cancel", f"backfill {backfill_id} has ended ({row['state']})")
    append_commands(settings_of(ctx), [CancelBackfill(dag_id=dag_id, backfill_id=backfill_id,
                                                      requested_by=REQUESTED_BY, at=time.time())],
                    "dags backfill-cancel")
    typer.echo(f"cancelling backfill {backfill_id} of {dag_id}")


@tasks_app.command("logs")
def tasks_logs(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               run_id: str = typer.Argument(..., help="The run."), task_id: str = typer.Argument(..., help="The task."),
               try_number: int | None = typer.Option(None, "--try", min=1, help="The try (default: the latest)."),
               map_index: int = typer.Option(-1, "--map-index", min=-1, help="Of a mapped task: instance N (each "
                                                                              "instance has its own tries)."),
               follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing what the try writes until "
                                                                         "it ends.")) -> None:
    """Print a try's log, read from tock.logs wherever the try ran (a try with nothing there: its file
    under TOCK_HOME, if this host has it)."""
    asked = TryRef(dag_id, run_id, task_id, try_number or 0, map_index)
    with tables(ctx, "tasks logs") as engine:
        dag, _run = targets.known_run(engine, dag_id, run_id)
        instance = asked.instance(engine)
        if instance is None and task_id not in targets.task_ids(dag):
            fail("tasks logs", f"no task {task_id} in DAG {dag_id}")
        try_number = try_number or (instance or {}).get("try_number")
        if try_number is None:
            mapped = " (a mapped task: give --map-index N)" if queries.is_mapped_whole(instance) else ""
            fail("tasks logs", f"task {asked.named} has not run in {dag_id} / {run_id} yet{mapped}")
        try_ref = replace(asked, try_number=try_number)
        since = try_start(engine, try_ref, instance)
    try:
        if not _print_shipped(ctx, try_ref, since, follow):
            _print_local_file(ctx, try_ref, instance)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _print_shipped(ctx: typer.Context, try_ref: TryRef, since: float, follow: bool) -> bool:
    """Print the try's texts from tock.logs; whether the topic holds any record of the try."""
    found = False
    with tables(ctx, "tasks logs") as engine:
        def ended() -> bool:
            return try_has_ended(try_ref.instance(engine), try_ref.try_number)

        try:
            for batch in shipped_texts(settings_of(ctx), try_ref, since, ended if follow else None):
                _write(batch.texts)
                found = batch.found
        except KafkaException as error:
            fail("tasks logs", f"cannot read tock.logs: {error}")
    return found


def _print_local_file(ctx: typer.Context, try_ref: TryRef, instance: dict | None) -> None:
    path = log_file(settings_of(ctx).home, *astuple(try_ref))
    if not path.is_file():
        where = f" (it ran on {instance['hostname']})" if instance and instance.get("hostname") else ""
        fail("tasks logs", f"no log of try {try_ref.try_number} of {try_ref.named} in tock.logs, "
                           f"nor on this host at {path}{where}")
    for chunk in file_chunks(path):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


def _write(texts: list[str]) -> None:
    for text in texts:
        sys.stdout.buffer.write(text.encode())
    if texts:
        sys.stdout.buffer.flush()
