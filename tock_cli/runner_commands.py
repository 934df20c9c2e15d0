"""``tock run-task``: the command every executor launches (a local runner, a Celery worker's, a pod's).

Kept apart, with nothing heavy imported at module level: a pod pays the interpreter and what the
runner needs, not every command of the CLI (``tock_cli.main`` registers only this module for it).
"""

from __future__ import annotations

from pathlib import Path

import typer

from tock_cli import settings_of


def register(app: typer.Typer) -> None:
    app.command("run-task")(run_task)


def run_task(ctx: typer.Context,
             dag_id: str = typer.Argument(..., help="The DAG."),
             run_id: str = typer.Argument(..., help="The run."),
             task_id: str = typer.Argument(..., help="The task."),
             try_number: int = typer.Argument(..., min=1, help="The try (1 for the first)."),
             dag_file: Path = typer.Option(..., "--dag-file", exists=True, dir_okay=False,
                                           help="The DAG file that defines the DAG."),
             execution_timeout: float | None = typer.Option(None, help="Seconds before the task is killed."),
             executor: str = typer.Option("", help="Executor name, reported in TaskStarted (informational)."),
             queue: str = typer.Option("", help="Queue name, reported in TaskStarted (informational)."),
             queued_at: float = typer.Option(0.0, help="The `at` of the try's TaskQueued (seconds since the epoch): "
                                                       "where the claim starts reading; 0 reads the whole partition."),
             map_index: int = typer.Option(-1, "--map-index", help="Which instance of a mapped task (-1: not mapped)."),
             queued_offset: int = typer.Option(-1, "--queued-offset", min=-1,
                                               help="The offset of the try's TaskQueued in its partition of "
                                                    "tock.events: where the claim starts reading (-1: unknown, "
                                                    "found from --queued-at).")
             ) -> None:
    """Run one try: report TaskStarted, heartbeats and the outcome to Kafka; output to a log file.

    Exit codes: 0 succeeded, 1 failed, 3 another runner started this try first (nothing was run).
    """
    from services.runner import TryRequest, run_try

    request = TryRequest(dag_id, run_id, task_id, try_number, str(dag_file.resolve()), execution_timeout, queued_at,
                         map_index=map_index, queued_offset=queued_offset)
    raise typer.Exit(run_try(settings_of(ctx), request, executor=executor, queue=queue))
