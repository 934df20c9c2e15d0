"""``tock tasks clear|mark|kill``, ``tock runs clear``, ``tock dags pause|unpause``, ``tock commands show``.

Each checks what it names against the projection tables, appends its command to the log and
prints the request id; the owning scheduler applies it (or rejects it: ``tock commands show``).
"""

from __future__ import annotations

import enum
import json
import time

import typer

from projections import queries
from schemas import ClearTask, KillTask, MarkTask, PauseDag
from schemas.tasks import instance_name
from services.api import targets
from tock_cli import settings_of
from tock_cli.appending import (
    REQUEST_ID_OPTION,
    REQUESTED_BY,
    YES_OPTION,
    append_commands,
    date_option,
    derived_request_id,
    fail,
    show_request,
    tables,
)
from tock_cli.groups import commands_app, dags_app, runs_app, tasks_app

DOWNSTREAM_OPTION = typer.Option(False, "--downstream", help="Also clear every task after it.")
UPSTREAM_OPTION = typer.Option(False, "--upstream", help="Also clear every task before it.")
RECURSIVE_OPTION = typer.Option(False, "--recursive", help="An ExternalTaskMarker cleared also clears the task it "
                                                           "names in another DAG, and what follows it there.")


class MarkState(str, enum.Enum):
    success = "success"
    failed = "failed"
    skipped = "skipped"


MAP_INDEX_OPTION = typer.Option(-1, "--map-index", min=-1, help="Of a mapped task: only instance N (default: every "
                                                      "instance, or a task that is not mapped).")


def _named(task_id: str, map_index: int) -> str:
    return instance_name(task_id, map_index)


def register(_app: typer.Typer) -> None:
    """Commands are added to the shared groups when this module is imported."""


@tasks_app.command("clear")
def tasks_clear(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
                run_id: str | None = typer.Argument(None, help="The run (with --state: only this run)."),
                task_id: str | None = typer.Argument(None, help="The task (with --state: only this task)."),
                state: str | None = typer.Option(None, "--state", help="Clear every task instance of the DAG in "
                                                                         "this state (e.g. failed, upstream_failed)."),
                start_date: float | None = date_option("--start-date", "With --state: runs with a logical date "
                                                                         "at or after this."),
                end_date: float | None = date_option("--end-date", "With --state: runs with a logical date at "
                                                                     "or before this."),
                downstream: bool = DOWNSTREAM_OPTION, upstream: bool = UPSTREAM_OPTION, yes: bool = YES_OPTION,
                request_id: str = REQUEST_ID_OPTION, map_index: int = MAP_INDEX_OPTION,
                recursive: bool = RECURSIVE_OPTION) -> None:
    """Run task instances again with new tries: one (DAG RUN TASK), or every one in a --state.

    A finished run reopens; a running try is stopped first (the runner kills its user code), then the
    new try is queued. With --state, each instance gets its own ClearTask (request ids derived from
    --request-id) after you confirm the list.
    """
    if state is None:
        if run_id is None or task_id is None or start_date is not None or end_date is not None:
            fail("tasks clear", "give DAG RUN TASK, or --state (with --start-date / --end-date) to clear by state",
                 code=2)
        _clear_one(ctx, ClearTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index,
                                  request_id=request_id, downstream=downstream, upstream=upstream,
                                  recursive=recursive, requested_by=REQUESTED_BY, at=time.time()))
        return
    with tables(ctx, "tasks clear") as engine:
        dag = targets.known_dag(engine, dag_id, active=True)
        found = queries.task_instances_in_state(engine, dag_id, state, start=start_date, end=end_date)
    found = [row for row in found if run_id in (None, row["run_id"]) and task_id in (None, row["task_id"])]
    events = [ClearTask(dag_id=dag_id, run_id=row["run_id"], task_id=row["task_id"],
                        request_id=derived_request_id(request_id, row["run_id"], row["task_id"]),
                        downstream=downstream, upstream=upstream, recursive=recursive, requested_by=REQUESTED_BY,
                        at=time.time())
              for row in found if row["task_id"] in targets.task_ids(dag)]
    _clear_many(ctx, events, f"no task instance of DAG {dag_id} is {state}", yes)


def _clear_one(ctx: typer.Context, event: ClearTask) -> None:
    with tables(ctx, "tasks clear") as engine:
        targets.known_task(engine, event.dag_id, event.run_id, event.task_id, map_index=event.map_index)
    append_commands(settings_of(ctx), [event], "tasks clear")
    typer.echo(f"clearing {_named(event.task_id, event.map_index)} in {event.dag_id} / {event.run_id}: "
               f"{show_request(event.request_id)}")


def _clear_many(ctx: typer.Context, events: list[ClearTask], nothing: str, yes: bool) -> None:
    if not events:
        typer.echo(f"nothing to clear: {nothing}")
        return
    for event in events:
        typer.echo(f"  {event.dag_id} / {event.run_id} / {event.task_id}")
    if not yes and not typer.confirm(f"Clear these {len(events)} task instance(s)?"):
        fail("tasks clear", "nothing cleared")
    append_commands(settings_of(ctx), events, "tasks clear")
    for event in events:
        typer.echo(f"cleared {event.dag_id} / {event.run_id} / {event.task_id}: request id {event.request_id}")


@runs_app.command("clear")
def runs_clear(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               run_id: str = typer.Argument(..., help="The run."), request_id: str = REQUEST_ID_OPTION) -> None:
    """Run every task of a run again (a ClearTask naming no task). A finished run reopens; running
    tries are stopped first."""
    with tables(ctx, "runs clear") as engine:
        targets.known_run(engine, dag_id, run_id, active=True)
    event = ClearTask(dag_id=dag_id, run_id=run_id, task_id="", request_id=request_id, requested_by=REQUESTED_BY,
                      at=time.time())
    append_commands(settings_of(ctx), [event], "runs clear")
    typer.echo(f"clearing every task of {dag_id} / {run_id}: {show_request(request_id)}")


@tasks_app.command("mark")
def tasks_mark(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               run_id: str = typer.Argument(..., help="The run."), task_id: str = typer.Argument(..., help="The task."),
               state: MarkState = typer.Option(..., "--state", help="The state to set."),
               request_id: str = REQUEST_ID_OPTION, map_index: int = MAP_INDEX_OPTION) -> None:
    """Set a task instance's state by hand, whatever it is now (not queued yet included).

    A running try is stopped first and its late outcome does not change the mark. Downstream tasks
    follow: success releases them, failed makes them upstream_failed, skipped skips them.
    """
    with tables(ctx, "tasks mark") as engine:
        targets.known_task(engine, dag_id, run_id, task_id, map_index=map_index)
    event = MarkTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, state=state.value,
                     request_id=request_id, requested_by=REQUESTED_BY, at=time.time())
    append_commands(settings_of(ctx), [event], "tasks mark")
    typer.echo(f"marking {_named(task_id, map_index)} in {dag_id} / {run_id} {state.value}: {show_request(request_id)}")


@tasks_app.command("kill")
def tasks_kill(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               run_id: str = typer.Argument(..., help="The run."), task_id: str = typer.Argument(..., help="The task."),
               request_id: str = REQUEST_ID_OPTION, map_index: int = MAP_INDEX_OPTION) -> None:
    """Stop a task instance's queued or running try: its runner kills the user code and the try ends
    as killed (failed, not retried; downstream tasks become upstream_failed)."""
    with tables(ctx, "tasks kill") as engine:
        target = targets.known_task(engine, dag_id, run_id, task_id, active=False, map_index=map_index)
        targets.killable(target, _named(task_id, map_index))
    event = KillTask(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, request_id=request_id,
                     requested_by=REQUESTED_BY, at=time.time())
    append_commands(settings_of(ctx), [event], "tasks kill")
    typer.echo(f"killing {_named(task_id, map_index)} in {dag_id} / {run_id}: {show_request(request_id)}")


@dags_app.command("pause")
def dags_pause(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG.")) -> None:
    """Pause a DAG: no new task of any of its runs starts and no scheduled run is created; tries
    already running finish. (Idempotent: pausing carries no request id.)"""
    _pause(ctx, dag_id, True)


@dags_app.command("unpause")
def dags_unpause(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG.")) -> None:
    """Unpause a DAG: its open runs go on and scheduled runs are created again."""
    _pause(ctx, dag_id, False)


def _pause(ctx: typer.Context, dag_id: str, paused: bool) -> None:
    command = "dags pause" if paused else "dags unpause"
    with tables(ctx, command) as engine:
        targets.known_dag(engine, dag_id)
    append_commands(settings_of(ctx), [PauseDag(dag_id=dag_id, paused=paused, requested_by=REQUESTED_BY,
                                                at=time.time())], command)
    typer.echo(f"{'pausing' if paused else 'unpausing'} {dag_id}")


@commands_app.command("show")
def commands_show(ctx: typer.Context, request_id: str = typer.Argument(..., help="The command's request id."),
                  as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """A command by its request id: accepted (in the log) or rejected by the scheduler, with the reason."""
    with tables(ctx, "commands show") as engine:
        rows = queries.commands(engine, request_id)
    if not rows:
        fail("commands show", f"no command with request id {request_id} in the tables (pause and backfill-cancel "
                              "carry none; is `tock projector` running?)")
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    for row in rows:
        for name in ("command", "status", "reason", "dag_id", "run_id", "task_id", "requested_by", "at",
                     "appended", "payload"):
            if row.get(name) not in (None, ""):
                typer.echo(f"{name + ':':14}{_shown(name, row[name])}")


def _shown(name: str, value) -> str:
    if name == "at":
        return targets.iso(value)
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
