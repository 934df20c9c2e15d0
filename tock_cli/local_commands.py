"""``tock dags test`` and ``tock tasks test``: a DAG, or one task, run here, with no broker or service."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from schemas.tasks import instance_name
from tock_cli import settings_of
from tock_cli.groups import dags_app, tasks_app


def register(_app: typer.Typer) -> None:
    """The commands are on the groups (``dags_app``, ``tasks_app``), added when this module is imported."""


FILE_OPTION = typer.Option(None, "--file", "-f", help="The DAG file (default: look through TOCK_DAGS_FOLDER).")
CONF_OPTION = typer.Option("{}", "--conf", "-c", help="The run's conf, a JSON object.")
DATE_ARGUMENT = typer.Argument(None, help="The run's logical date, ISO 8601 (a date or a date and time; "
                                          "no zone = UTC). Default: now.")


@dags_app.command("test")
def dags_test(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
              logical_date: str | None = DATE_ARGUMENT, conf: str = CONF_OPTION, file: Path | None = FILE_OPTION,
              as_json: bool = typer.Option(False, "--json", help="Print the run's state and every task "
                                                                 "instance (task id, map index, state, values) "
                                                                 "as JSON; task output goes to stderr.")) -> None:
    """Run DAG_ID once, here, to its end, as `airflow dags test` does: no broker, no service; the
    scheduler's own core decides, each task runs in this process with the context its TaskQueued
    records. Prints each task's state, output and values. Exit 0 when the run succeeds, 1 when not."""
    from tock_cli.local_run import run_dag

    dag = _dag(ctx, dag_id, file)
    _conf_fits(dag, _conf(conf), "dags test")
    settings = settings_of(ctx)
    out = sys.stderr if as_json else sys.stdout
    with contextlib.redirect_stdout(out):
        result = run_dag(dag, logical_date=_logical_date(logical_date), conf=_conf(conf),
                         xcom_max_bytes=settings.xcom_max_bytes, report=lambda line: print(line, flush=True),
                         secrets=_secrets(settings))
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2, sort_keys=True))
    else:
        for instance in result.task_instances:
            shown = instance_name(instance.task_id, instance.map_index)
            typer.echo(f"{shown}: {instance.state} (try {instance.try_number})"
                       + (f" · {instance.values_json}" if instance.values_json else ""))
        typer.echo(f"run {result.run_id}: {result.state}")
    raise typer.Exit(0 if result.state == "success" else 1)


@tasks_app.command("test")
def tasks_test(ctx: typer.Context, dag_id: str = typer.Argument(..., help="The DAG."),
               task_id: str = typer.Argument(..., help="The task."), logical_date: str | None = DATE_ARGUMENT,
               conf: str = CONF_OPTION, file: Path | None = FILE_OPTION,
               replay: str | None = typer.Option(None, "--replay", metavar="RUN_ID",
                                                 help="Run it with exactly the context its try in RUN_ID was "
                                                      "queued with (its TaskQueued, from the projections: "
                                                      "dates, conf, params, upstream values)."),
               try_number: int | None = typer.Option(None, "--try", help="With --replay: which try "
                                                                          "(default: the latest).")) -> None:
    """Run one task of DAG_ID here, alone (no upstream task runs; with --replay its upstream values are
    those its try read), and print its state and values. Exit 0 when it succeeds or skips, 1 when not."""
    from services.runner.task_code import TryProgress, run_task_code

    dag = _dag(ctx, dag_id, file)
    if task_id not in dag.tasks:
        typer.echo(f"tock tasks test: DAG {dag_id!r} has no task {task_id!r} (it has {', '.join(sorted(dag.tasks))})",
                   err=True)
        raise typer.Exit(2)
    if not replay:
        _conf_fits(dag, _conf(conf), "tasks test")
    queued = _replayed(ctx, dag_id, replay, task_id, try_number) if replay else \
        _fresh(dag, task_id, _logical_date(logical_date), _conf(conf))
    from tock.secrets import SecretsChain, install

    install(SecretsChain(_secrets(settings_of(ctx))))
    progress = TryProgress()
    try:
        result = run_task_code(dag.tasks[task_id], queued.run_id, queued.try_number, queued,
                               settings_of(ctx).xcom_max_bytes, progress)
    except Exception as error:  # noqa: BLE001 - the task's failure, reported as the runner would
        import traceback

        traceback.print_exception(error)
        typer.echo(f"{task_id}: failed: {type(error).__name__}: {error}")
        raise typer.Exit(1) from None
    failed = result.exit_code or result.signal
    typer.echo(f"{task_id}: {_ending(result)}" + (f" · {result.values_json}" if result.values_json else ""))
    raise typer.Exit(1 if failed else 0)


def _ending(result) -> str:
    """How a try that ran to its end ended, in words: failed, skipped (why), or success (and what a
    branch or short circuit follows); a skip is no failure (exit 0)."""
    if result.exit_code or result.signal:
        return "failed"
    if result.skipped:
        return f"skipped: {result.reason}"
    if result.follow is not None:
        return f"success, follows {', '.join(result.follow) or 'none of its downstream tasks'}"
    return "success"


def _conf_fits(dag, conf: dict[str, Any], command: str) -> None:
    """Refuse (exit 2) a conf the DAG's params refuse, naming each param and the rule, as `tock dags
    trigger` does (the scheduler's core would reject the trigger: the run would never start)."""
    from schemas.params import problems

    refused = problems(dag.params_json, json.dumps(conf))
    if refused:
        typer.echo(f"tock {command}: --conf does not fit the params of DAG {dag.dag_id}: " + "; ".join(refused),
                   err=True)
        raise typer.Exit(2)


def _secrets(settings):
    """The chain a task reads variables and connections through: this installation's, as a runner's."""
    import os

    from infra.secrets import secrets_backends

    return secrets_backends(settings, dict(os.environ), writer="tock dags test")


def _fresh(dag, task_id: str, logical_date: float | None, conf: dict[str, Any]):
    from schemas import TaskQueued
    from schemas import params as dag_params

    moment = time.time() if logical_date is None else logical_date
    definition = dag.to_definition(dag.fileloc or "<dag>")
    task = next(task for task in definition.tasks if task.task_id == task_id)
    params = dag_params.for_task(definition.params_json, task.params_json, json.dumps(conf))
    return TaskQueued(dag_id=dag.dag_id, run_id=f"test__{datetime.fromtimestamp(moment, UTC).isoformat()}",
                      task_id=task_id, try_number=1, executor="local", queue="default", scheduler_id="tasks-test",
                      run_type="manual", logical_date=moment, data_interval_start=moment, data_interval_end=moment,
                      conf_json=json.dumps(conf), params_json=json.dumps(params, default=repr), at=time.time())


def _replayed(ctx: typer.Context, dag_id: str, run_id: str, task_id: str, try_number: int | None):
    from projections import queries
    from projections.db import create_tables, open_engine
    from schemas import TaskQueued, TryInput

    engine = open_engine(settings_of(ctx))
    try:
        create_tables(engine)
        rows = [row for row in queries.task_history(engine, dag_id, run_id, task_id, limit=100_000)
                if row["event_type"] == "TaskQueued" and (try_number is None or row["try_number"] == try_number)]
    finally:
        engine.dispose()
    if not rows:
        which = f"try {try_number}" if try_number is not None else "any try"
        typer.echo(f"tock tasks test: no TaskQueued of {which} of {dag_id} / {run_id} / {task_id} in the "
                   "projections (see `tock tasks history`)", err=True)
        raise typer.Exit(2)
    payload = dict(rows[-1]["payload"])
    payload["inputs"] = [TryInput(**item) for item in payload.get("inputs") or []]
    known = set(TaskQueued.__dataclass_fields__)
    return TaskQueued(**{name: value for name, value in payload.items() if name in known})


def _dag(ctx: typer.Context, dag_id: str, file: Path | None):
    from tock import load_dags

    files = [file] if file is not None else sorted(settings_of(ctx).resolved_dags_folder.rglob("*.py"))
    problems: list[str] = []
    for path in files:
        try:
            found = {dag.dag_id: dag for dag in load_dags(path)}
        except Exception as error:  # noqa: BLE001 - another file's error is reported only if the DAG is not found
            problems.append(f"{path}: {type(error).__name__}: {error}")
            continue
        if dag_id in found:
            return found[dag_id]
    where = str(file) if file is not None else f"the DAGs folder {settings_of(ctx).resolved_dags_folder}"
    typer.echo(f"tock: no DAG {dag_id!r} in {where}" + "".join(f"\n  (could not load {problem})"
                                                             for problem in problems), err=True)
    raise typer.Exit(2)


def _logical_date(text: str | None) -> float | None:
    """The run's logical date by the CLI's one date rule (schemas.schedule.parse_date, as `dags trigger -l`)."""
    from schemas.schedule import parse_date

    if text is None:
        return None
    try:
        return parse_date(text)
    except ValueError as error:
        typer.echo(f"tock: the logical date {text!r} is not ISO 8601 or out of range ({error})", err=True)
        raise typer.Exit(2) from None


def _conf(text: str) -> dict[str, Any]:
    try:
        conf = json.loads(text)
    except ValueError as error:
        typer.echo(f"tock: --conf must be a JSON object ({error})", err=True)
        raise typer.Exit(2) from None
    if not isinstance(conf, dict):
        typer.echo(f"tock: --conf must be a JSON object, not {type(conf).__name__}", err=True)
        raise typer.Exit(2)
    return conf
