"""``@task`` and its variants (``@task.branch``, ``@task.short_circuit``): Python functions as tasks."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, overload

from schemas.dags import SENSOR_TIMEOUT, SensorDefinition
from tock.mapping import PartialTaskFunction
from tock.tasks import Task, TaskOptions, _new_task
from tock.trigger_rules import TriggerRule
from tock.virtualenv import Interpreter


@dataclass(frozen=True)
class Role:
    """What a task function's tasks are, besides their options: whether they choose what follows
    them, and whether they are setups or teardowns."""

    chooses: str = ""  # "", "branch" or "short_circuit"
    ignore_downstream_trigger_rules: bool = True
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False
    sensor: SensorDefinition | None = None  # @task.sensor: how it waits between pokes (tock/sensors.py)
    interpreter: Interpreter | None = None  # @task.virtualenv / @task.external_python (tock/virtualenv.py)


class TaskFunction:
    """A ``@task`` function: called inside a ``with DAG`` block, it adds a task and returns it.

    Outside a DAG it is the plain function, so user code stays testable.
    The call's arguments are kept on the task for the runner to pass on.
    """

    def __init__(self, function: Callable[..., Any], task_id: str | None, given: dict[str, Any],
                 role: Role = Role()) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.task_id = task_id or function.__name__
        self.given = dict(given)  # the options the decorator was given (a group's defaults fill the rest)
        self.options = TaskOptions(**given)  # an unknown option fails here, at the decorator
        self.role = role

    @property
    def is_setup(self) -> bool:
        return self.role.is_setup

    @property
    def is_teardown(self) -> bool:
        return self.role.is_teardown

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Inside a DAG: a new task of it (its value, when given to another task, is this task's return
        value; a task id already taken gets ``__1``, ``__2``... as in Airflow). Outside: the function."""
        from tock.dag import current_dag

        if current_dag() is None:
            return self.function(*args, **kwargs)
        given = self.given
        if self.role.is_teardown:
            if "trigger_rule" in given:
                raise ValueError(f"task {self.task_id!r}: Trigger rule not configurable for teardown tasks. "
                                 "(a teardown's is all_done_setup_success)")
            given = {**given, "trigger_rule": TriggerRule.ALL_DONE_SETUP_SUCCESS.value}
        if self.function.__doc__ and given.get("doc_md") is None and given.get("doc") is None:
            given = {**given, "doc_md": self.function.__doc__}  # Airflow's: the docstring is the task's docs
        kind = "python" if self.role.sensor is None else "sensor"
        created = _new_task(None, self.task_id, kind, given, unique=True, python_callable=self.function,
                            args=args, kwargs=kwargs, **vars(self.role))
        created.trigger_rule_given = "trigger_rule" in self.given
        return created

    # Dynamic task mapping (tock/mapping.py), Airflow's names.
    def partial(self, **kwargs: Any) -> PartialTaskFunction:
        """Fix some arguments of a mapped task; ``.expand()`` / ``.expand_kwargs()`` map the others."""
        return PartialTaskFunction(self, kwargs)

    def expand(self, **mapped: Any) -> Task:
        """A mapped task: one instance per element of each argument's list or dict (their product)."""
        return self.partial().expand(**mapped)

    def expand_kwargs(self, value: Any) -> Task:
        """A mapped task: one instance per dict of ``value``, each its keyword arguments."""
        return self.partial().expand_kwargs(value)

    def override(self, **changes: Any) -> TaskFunction:
        """This task function with other options (``task_id``, ``retries``...), as Airflow's ``override``."""
        task_id = changes.pop("task_id", self.task_id)
        return TaskFunction(self.function, task_id, {**self.given, **changes}, self.role)

    def with_role(self, **changes: Any) -> TaskFunction:
        """The same function and options, with its role changed (``@setup`` / ``@teardown``)."""
        self.role = replace(self.role, **changes)
        return self


Decorated = TaskFunction | Callable[[Callable[..., Any]], TaskFunction]


def _decorator(function: Callable[..., Any] | None, task_id: str | None, options: dict[str, Any],
               role: Role, name: str) -> Decorated:
    TaskOptions(**options)  # an unknown option fails at the decorator, before any function

    def decorate(inner: Callable[..., Any]) -> TaskFunction:
        if not callable(inner) or isinstance(inner, Task):
            raise TypeError(f"{name} decorates a function, not {inner!r}")
        return TaskFunction(inner, task_id, options, role)

    return decorate if function is None else decorate(function)


class TaskDecorator:
    """``task``: ``@task``, ``@task(retries=2, ...)``, and Airflow's variants ``@task.python``,
    ``@task.branch`` and ``@task.short_circuit``."""

    @overload
    def __call__(self, function: Callable[..., Any], *, task_id: str | None = None,
                 **options: Any) -> TaskFunction: ...

    @overload
    def __call__(self, function: None = None, *, task_id: str | None = None,
                 **options: Any) -> Callable[[Callable[..., Any]], TaskFunction]: ...

    def __call__(self, function: Callable[..., Any] | None = None, *, task_id: str | None = None,
                 **options: Any) -> Decorated:
        """Declare a Python task: ``@task`` or ``@task(retries=2, executor="celery", ...)``.

        Options: retries, retry_delay (seconds or timedelta), execution_timeout, deadline (seconds or a
        timedelta after the task instance is first queued in a run: `tock monitor` writes a
        TaskDeadlineMissed if it has not ended by then), executor ("local" | "celery" | "kubernetes"),
        queue, pod_override ({"image", "resources"}), multiple_outputs (a returned dict is also passed on
        key by key; default: whether the function is annotated ``-> dict``), do_xcom_push (default True),
        trigger_rule (a ``TriggerRule`` or its string; default all_success), priority_weight and weight_rule
        (a ``WeightRule`` or its string; default downstream), max_active_tis_per_dag / max_active_tis_per_dagrun,
        retry_exponential_backoff and max_retry_delay.
        Called inside a DAG with other tasks (or their ``["key"]``) as arguments, it depends on them and
        receives their values when it runs.
        """
        return _decorator(function, task_id, options, Role(), "@task")

    python = __call__

    def branch(self, function: Callable[..., Any] | None = None, *, task_id: str | None = None,
               **options: Any) -> Decorated:
        """``@task.branch``: the function returns the task ids (or task group ids) to follow, a list of
        them, or None; the other tasks directly downstream are skipped (``tock.branching.followed``)."""
        return _decorator(function, task_id, options, Role(chooses="branch"), "@task.branch")

    def short_circuit(self, function: Callable[..., Any] | None = None, *, task_id: str | None = None,
                      ignore_downstream_trigger_rules: bool = True, **options: Any) -> Decorated:
        """``@task.short_circuit``: a falsy return value skips what is downstream (all of it, or with
        ``ignore_downstream_trigger_rules=False`` its direct downstream, the rest by their rules)."""
        if not isinstance(ignore_downstream_trigger_rules, bool):
            raise TypeError(f"ignore_downstream_trigger_rules must be True or False, got "
                            f"{ignore_downstream_trigger_rules!r}")
        role = Role(chooses="short_circuit", ignore_downstream_trigger_rules=ignore_downstream_trigger_rules)
        return _decorator(function, task_id, options, role, "@task.short_circuit")


    def sensor(self, function: Callable[..., Any] | None = None, *, task_id: str | None = None,
               poke_interval: Any = 60.0, timeout: Any = SENSOR_TIMEOUT, soft_fail: bool = False,
               mode: str = "reschedule", exponential_backoff: bool = False, max_wait: Any = None,
               deferrable: bool = False, **options: Any) -> Decorated:
        """``@task.sensor``: the function is a sensor's poke (tock/sensors.py): it returns True, or
        ``PokeReturnValue(True, xcom_value)``, when its condition is met. Settings as for
        ``BaseSensorOperator``; its arguments and options as for ``@task``."""
        from tock.sensors import sensor_definition

        name = str(task_id or getattr(function, "__name__", "@task.sensor"))
        waits = sensor_definition(name, poke_interval=poke_interval, timeout=timeout, soft_fail=soft_fail, mode=mode,
                                  exponential_backoff=exponential_backoff, max_wait=max_wait, deferrable=deferrable)
        return _decorator(function, task_id, options, Role(sensor=waits), "@task.sensor")

    def virtualenv(self, function: Callable[..., Any] | None = None, *, task_id: str | None = None,
                   requirements: Any = None, python_version: Any = None, system_site_packages: bool = False,
                   pip_install_options: Any = None, **options: Any) -> Decorated:
        """``@task.virtualenv``: the function runs in a virtualenv with ``requirements`` (pip's lines),
        built from PyPI once per content and cached (tock/virtualenv.py); it imports what it uses inside
        itself. ``python_version`` ("3.12"): a ``python3.12`` on the worker's PATH instead of this one."""
        made = Interpreter.virtualenv(requirements, python_version, system_site_packages, pip_install_options)
        return _decorator(function, task_id, options, Role(interpreter=made), "@task.virtualenv")

    def external_python(self, function: Callable[..., Any] | None = None, *, python: str, task_id: str | None = None,
                        **options: Any) -> Decorated:
        """``@task.external_python(python="/opt/venv/bin/python")``: the function runs in that interpreter."""
        return _decorator(function, task_id, options, Role(interpreter=Interpreter.external_python(python)),
                          "@task.external_python")


task = TaskDecorator()
