"""Airflow's standard operators: ``PythonOperator`` and the ones that choose (``BranchPythonOperator``,
``ShortCircuitOperator``, ``LatestOnlyOperator``), ``BashOperator`` and ``EmptyOperator``.

Each is a ``Task`` (its options as for ``@task``: retries, trigger_rule, queue...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from schemas import schedule as cron
from tock.tasks import Task, bash_fields, init_task

if TYPE_CHECKING:
    from tock.dag import DAG


class PythonOperator(Task):
    """``PythonOperator(task_id, python_callable, op_args=..., op_kwargs=..., templates_dict=...)``:
    calls ``python_callable(*op_args, **op_kwargs)``, with the context keys it names (Airflow's rule).
    Its return value is passed on whole (no ``multiple_outputs`` unless given)."""

    chooses_as = ""
    mappable_arguments = {"op_args": "args", "op_kwargs": "kwargs"}  # noqa: RUF012 - read only (tock/mapping.py)

    def __init__(self, task_id: str, python_callable: Callable[..., Any], op_args: Iterable[Any] | None = None,
                 op_kwargs: dict[str, Any] | None = None, templates_dict: dict[str, Any] | None = None,
                 templates_exts: list[str] | tuple[str, ...] | None = None, show_return_value_in_logs: bool = True,
                 dag: DAG | None = None, **options: Any) -> None:
        name = type(self).__name__
        if not callable(python_callable):
            raise TypeError(f"{name} {task_id!r}: python_callable must be callable, got {python_callable!r}")
        if op_kwargs is not None and not isinstance(op_kwargs, dict):
            raise TypeError(f"{name} {task_id!r}: op_kwargs must be a dict, got {op_kwargs!r}")
        given = {"multiple_outputs": False, **options}
        given.update({key: value for key, value in (("templates_dict", templates_dict),
                                                    ("templates_exts", templates_exts)) if value is not None})
        self.show_return_value_in_logs = show_return_value_in_logs
        init_task(self, dag, task_id, "python", given, python_callable=python_callable,
                  args=tuple(op_args or ()), kwargs=dict(op_kwargs or {}), **self._choice(options))

    def _choice(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"chooses": self.chooses_as} if self.chooses_as else {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dag.dag_id}.{self.task_id}>"


class PythonVirtualenvOperator(PythonOperator):
    """``PythonVirtualenvOperator(task_id, python_callable, requirements=[...], python_version=None,
    system_site_packages=False, pip_install_options=None, op_args=..., op_kwargs=...)``: ``python_callable``
    runs in a virtualenv of its requirements, built once per content and cached (tock/virtualenv.py)."""

    def __init__(self, task_id: str, python_callable: Callable[..., Any], requirements: Any = None,
                 python_version: Any = None, system_site_packages: bool = False, pip_install_options: Any = None,
                 **kwargs: Any) -> None:
        from tock.virtualenv import Interpreter

        made = Interpreter.virtualenv(requirements, python_version, system_site_packages, pip_install_options)
        super().__init__(task_id, python_callable, **kwargs)
        self.interpreter = made


class ExternalPythonOperator(PythonOperator):
    """``ExternalPythonOperator(task_id, python="/opt/venv/bin/python", python_callable=...)``: the callable
    runs in that interpreter (tock/virtualenv.py)."""

    def __init__(self, task_id: str, python: str, python_callable: Callable[..., Any], **kwargs: Any) -> None:
        from tock.virtualenv import Interpreter

        made = Interpreter.external_python(python)
        super().__init__(task_id, python_callable, **kwargs)
        self.interpreter = made


class BranchPythonOperator(PythonOperator):
    """A ``PythonOperator`` whose callable returns the task ids (or task group ids) to follow, a list of
    them, or None; the other tasks directly downstream are skipped (``tock.branching.followed``)."""

    chooses_as = "branch"


class ShortCircuitOperator(PythonOperator):
    """A ``PythonOperator`` whose falsy return value skips what is downstream: everything downstream
    (``ignore_downstream_trigger_rules=True``, the default), or only its direct downstream tasks,
    the rest deciding by their trigger rules. A truthy value lets everything run."""

    chooses_as = "short_circuit"

    def __init__(self, *, ignore_downstream_trigger_rules: bool = True, **kwargs: Any) -> None:
        if not isinstance(ignore_downstream_trigger_rules, bool):
            raise TypeError(f"ShortCircuitOperator {kwargs.get('task_id')!r}: ignore_downstream_trigger_rules "
                            f"must be True or False, got {ignore_downstream_trigger_rules!r}")
        self._ignore = ignore_downstream_trigger_rules
        super().__init__(**kwargs)

    def _choice(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"chooses": self.chooses_as, "ignore_downstream_trigger_rules": self._ignore}


# What a mapped BashOperator's definition records as its command: each instance runs its element's.
MAPPED_COMMAND = "# mapped: each instance runs the bash_command of its element"


class BashOperator(Task):
    """``BashOperator(task_id, bash_command, env=..., append_env=..., cwd=..., skip_on_exit_code=99)``:
    ``BashTask`` as Airflow's class, so that it maps: ``BashOperator.partial(task_id=...).expand(
    bash_command=[...])`` runs one instance per command (``env`` and ``cwd`` map too); each instance's
    fields are rendered as templates after its element is applied."""

    mappable_arguments = {"bash_command": "command", "env": "env", "cwd": "cwd"}  # noqa: RUF012 - read only
    mapped_placeholders = {"bash_command": MAPPED_COMMAND}  # noqa: RUF012 - read only (tock/mapping.py)

    def __init__(self, task_id: str, bash_command: str, *, env: dict[str, str] | None = None,
                 append_env: bool = False, cwd: str | None = None, skip_on_exit_code: Any = 99,
                 dag: DAG | None = None, **options: Any) -> None:
        init_task(self, dag, task_id, "bash", options,
                  **bash_fields(task_id, bash_command, env, append_env, cwd, skip_on_exit_code, options))

    def __repr__(self) -> str:
        return f"<BashOperator {self.dag.dag_id}.{self.task_id}>"


class EmptyOperator(Task):
    """``EmptyOperator(task_id)``: a task that does nothing; the scheduler ends it successful without
    running anything (kind "empty"), as Airflow does. Useful as a join or a placeholder."""

    def __init__(self, task_id: str, dag: DAG | None = None, **options: Any) -> None:
        init_task(self, dag, task_id, "empty", options)

    def __repr__(self) -> str:
        return f"<EmptyOperator {self.dag.dag_id}.{self.task_id}>"


class LatestOnlyOperator(Task):
    """``LatestOnlyOperator(task_id)``: a branch that follows all its direct downstream tasks when the
    run is the latest (``is_latest_run``) and none otherwise, as Airflow 3's."""

    def __init__(self, task_id: str, dag: DAG | None = None, **options: Any) -> None:
        init_task(self, dag, task_id, "python", {"multiple_outputs": False, **options},
                  python_callable=follow_if_latest, chooses="branch")

    def __repr__(self) -> str:
        return f"<LatestOnlyOperator {self.dag.dag_id}.{self.task_id}>"


def follow_if_latest() -> list[str]:
    """LatestOnlyOperator's callable: its direct downstream task ids if this try's run is the latest,
    else none. Reads the running try's context; the clock is read here, in the try."""
    from tock.context import get_current_context

    context = get_current_context()
    task, run = context["task"], context["dag_run"]
    end = run.data_interval_end or run.logical_date
    latest = is_latest_run(run.run_type, _seconds(end), task.dag.schedule, task.dag.timezone, time.time())
    return sorted(task.downstream_task_ids) if latest else []


def is_latest_run(run_type: str, interval_end: float | None, schedule: str | None, timezone: str,
                  now: float) -> bool:
    """Airflow 3's LatestOnlyOperator rule: a manual run is always latest; otherwise the run is latest
    when ``now`` is inside the data interval of the schedule's *next* run, ``(interval_end, next fire]``
    (the next fire time after this run's interval end). With no next run (no schedule, ``@once``, a
    schedule that never fires again), or a run with no date, it is latest."""
    if run_type == "manual" or interval_end is None or schedule is None or schedule == cron.ONCE:
        return True
    following = cron.next_fire(schedule, interval_end, timezone)
    if following is None or following == interval_end:
        return True
    return interval_end < now <= following


def _seconds(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()
