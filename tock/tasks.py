"""Tasks of a DAG: ``@task`` functions, ``BashTask`` commands, and ``>>`` / ``<<`` dependencies."""

from __future__ import annotations

import functools
import json
import math
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

from tock.values import RETURN_VALUE

if TYPE_CHECKING:
    from tock.dag import DAG

Downstream = TypeVar("Downstream", bound="Task | XComArg | Iterable[Task | XComArg]")

EXECUTORS = ("local", "celery", "kubernetes")
# "|" separates dag, run and task ids in heartbeat keys, so ids stay to a safe alphabet.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$")


def seconds_of(value: float | timedelta | None, what: str) -> float | None:
    """A duration given as seconds or a timedelta, as seconds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be seconds or a timedelta, not {value!r}")
    if not math.isfinite(value):  # NaN or infinity: no time the scheduler can wait until
        raise ValueError(f"{what} must be a finite number of seconds, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """Per-task settings; ``None`` for retries / retry_delay means "the DAG's default"."""

    retries: int | None = None
    retry_delay: float | timedelta | None = None
    execution_timeout: float | timedelta | None = None
    deadline: float | timedelta | None = None
    executor: str = "local"
    queue: str = "default"
    pod_override: dict[str, Any] | None = None
    multiple_outputs: bool | None = None  # None: True when the function is annotated to return a dict
    do_xcom_push: bool = True  # its return value (a bash task's last line of output) is passed on

    def problems(self) -> list[str]:
        """What is wrong with these options, in words (empty when valid)."""
        found: list[str] = []
        if self.retries is not None and (not isinstance(self.retries, int) or self.retries < 0):
            found.append(f"retries must be a non-negative integer, got {self.retries!r}")
        durations = {"retry_delay": self.retry_delay, "execution_timeout": self.execution_timeout,
                     "deadline": self.deadline}
        for name, duration in durations.items():
            try:
                seconds_of(duration, name)
            except ValueError as error:
                found.append(str(error))
        if self.executor not in EXECUTORS:
            found.append(f"unknown executor {self.executor!r} (known: {', '.join(EXECUTORS)})")
        if not isinstance(self.queue, str) or not self.queue:
            found.append(f"queue must be a non-empty string, got {self.queue!r}")
        for name in ("multiple_outputs", "do_xcom_push"):
            if not isinstance(getattr(self, name), bool | None):
                found.append(f"{name} must be True or False, got {getattr(self, name)!r}")
        found.extend(_pod_override_problems(self.pod_override))
        return found

    def pod_override_json(self) -> str | None:
        return None if self.pod_override is None else json.dumps(self.pod_override, sort_keys=True)


def _pod_override_problems(pod_override: Any) -> list[str]:
    if pod_override is None:
        return []
    if not isinstance(pod_override, dict):
        return ["pod_override must be a dict like {'image': ..., 'resources': ..., 'env': ...}, "
                f"got {pod_override!r}"]
    found = []
    if "image" in pod_override and not isinstance(pod_override["image"], str):
        found.append(f"pod_override image must be a string, got {pod_override['image']!r}")
    if "resources" in pod_override and not isinstance(pod_override["resources"], dict):
        found.append(f"pod_override resources must be a dict, got {pod_override['resources']!r}")
    env = pod_override.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(key, str) and isinstance(value, str)
                                            for key, value in env.items()):
        found.append(f"pod_override env must be a dict of strings to strings, got {env!r}")
    unknown = sorted(set(pod_override) - {"image", "resources", "env"})
    if unknown:
        found.append(f"pod_override knows image, resources and env, not {', '.join(map(repr, unknown))}")
    try:
        json.dumps(pod_override)
    except (TypeError, ValueError) as error:
        found.append(f"pod_override must be JSON-serializable: {error}")
    return found


@dataclass(eq=False)
class Task:
    """One task of a DAG. Build it with ``@task`` or ``BashTask``, not directly."""

    task_id: str
    kind: str  # "python" or "bash"
    dag: DAG
    options: TaskOptions
    python_callable: Callable[..., Any] | None = None
    command: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    upstream_task_ids: set[str] = field(default_factory=set)
    downstream_task_ids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.dag.add_task(self)

    @property
    def retries(self) -> int:
        return self.dag.retries if self.options.retries is None else self.options.retries

    @property
    def retry_delay(self) -> float:
        own = seconds_of(self.options.retry_delay, "retry_delay")
        return self.dag.retry_delay if own is None else own

    @property
    def execution_timeout(self) -> float | None:
        return seconds_of(self.options.execution_timeout, "execution_timeout")

    @property
    def deadline(self) -> float | None:
        """Seconds after the task instance is first queued in a run by which it must have ended."""
        return seconds_of(self.options.deadline, "deadline")

    @property
    def executor(self) -> str:
        return self.options.executor

    @property
    def queue(self) -> str:
        return self.options.queue

    @property
    def pod_override(self) -> dict[str, Any] | None:
        return self.options.pod_override

    @property
    def multiple_outputs(self) -> bool:
        """Whether a returned dict is passed on key by key too (``result["key"]``)."""
        if self.options.multiple_outputs is not None:
            return self.options.multiple_outputs
        return _returns_dict(self.python_callable)

    @property
    def do_xcom_push(self) -> bool:
        return self.options.do_xcom_push

    @property
    def output(self) -> XComArg:
        """This task's return value, as the argument of another task (Airflow's ``task.output``)."""
        return XComArg(self)

    @property
    def operator(self) -> Task:
        """The task itself (what Airflow's XComArg.operator names), so a @task call's result reads
        the same whether it is treated as a task or as its value."""
        return self

    def __getitem__(self, key: str) -> XComArg:
        """The value this task passes on under ``key`` (with ``multiple_outputs``: a key of its dict)."""
        return XComArg(self, key)

    def set_downstream(self, others: Task | XComArg | Iterable[Task | XComArg]) -> None:
        for other in _tasks_of(others):
            self.dag.check_same_dag(self, other)
            self.downstream_task_ids.add(other.task_id)
            other.upstream_task_ids.add(self.task_id)

    def set_upstream(self, others: Task | XComArg | Iterable[Task | XComArg]) -> None:
        for other in _tasks_of(others):
            other.set_downstream(self)

    def __rshift__(self, other: Downstream) -> Downstream:
        self.set_downstream(other)
        return other

    def __lshift__(self, other: Downstream) -> Downstream:
        self.set_upstream(other)
        return other

    def __rrshift__(self, other: Iterable[Task]) -> Task:  # [a, b] >> self
        self.set_upstream(other)
        return self

    def __rlshift__(self, other: Iterable[Task]) -> Task:  # [a, b] << self
        self.set_downstream(other)
        return self

    def __repr__(self) -> str:
        return f"<Task {self.dag.dag_id}.{self.task_id} ({self.kind})>"


@dataclass(frozen=True, eq=False)
class XComArg:
    """A value a task passes on (its return value, or one key of it), used as another task's argument:
    ``load(transform(extract())["total"])`` makes the dependencies and passes the values at run time.
    It links like its task (``>>``, ``<<``)."""

    operator: Task
    key: str = RETURN_VALUE

    def __getitem__(self, key: str) -> XComArg:
        return XComArg(self.operator, key)

    def __rshift__(self, other: Downstream) -> Downstream:
        return self.operator.__rshift__(other)

    def __lshift__(self, other: Downstream) -> Downstream:
        return self.operator.__lshift__(other)

    def __rrshift__(self, other: Iterable[Task]) -> Task:
        return self.operator.__rrshift__(other)

    def __rlshift__(self, other: Iterable[Task]) -> Task:
        return self.operator.__rlshift__(other)

    def __repr__(self) -> str:
        return f"<XComArg {self.operator.task_id}[{self.key!r}]>"


def value_references(value: Any) -> list[Task]:
    """The tasks whose values ``value`` (an argument of a task, containers included) refers to."""
    if isinstance(value, Task):
        return [value]
    if isinstance(value, XComArg):
        return [value.operator]
    if isinstance(value, list | tuple | set | frozenset):
        return [task for item in value for task in value_references(item)]
    if isinstance(value, dict):
        return [task for item in value.values() for task in value_references(item)]
    return []


def _returns_dict(function: Callable[..., Any] | None) -> bool:
    """Whether ``function`` is annotated to return a dict (Airflow infers multiple_outputs from it)."""
    if function is None:
        return False
    try:
        returns = typing.get_type_hints(function).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate says nothing
        returns = function.__annotations__.get("return")
    origin = typing.get_origin(returns) or returns
    return isinstance(origin, type) and issubclass(origin, dict) or returns in ("dict", "Dict")


def _tasks_of(others: Task | XComArg | Iterable[Task | XComArg]) -> list[Task]:
    items = [others] if isinstance(others, Task | XComArg) else list(others)
    found = [item.operator if isinstance(item, XComArg) else item for item in items]
    for item in found:
        if not isinstance(item, Task):
            raise TypeError(f"dependencies link tasks, not {item!r}")
    return found


def _new_task(dag: DAG | None, task_id: str, kind: str, options: TaskOptions, **fields: Any) -> Task:
    from tock.dag import current_dag

    owner = dag or current_dag()
    if owner is None:
        raise RuntimeError(f"task {task_id!r} must be created inside a `with DAG(...)` block or given dag=")
    owner.check_task(task_id, options)
    created = Task(task_id=task_id, kind=kind, dag=owner, options=options, **fields)
    arguments = [*created.args, *created.kwargs.values()]
    created.set_upstream([upstream for value in arguments for upstream in value_references(value)])
    return created


def BashTask(task_id: str, command: str, *, dag: DAG | None = None, **options: Any) -> Task:  # noqa: N802
    """A task that runs ``command`` with bash. Options as for ``@task``."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"BashTask {task_id!r} needs a non-empty command string")
    return _new_task(dag, task_id, "bash", TaskOptions(**options), command=command)


class TaskFunction:
    """A ``@task`` function: called inside a ``with DAG`` block, it adds a task and returns it.

    Outside a DAG it is the plain function, so user code stays testable.
    The call's arguments are kept on the task for the runner to pass on.
    """

    def __init__(self, function: Callable[..., Any], task_id: str | None, options: TaskOptions) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.task_id = task_id or function.__name__
        self.options = options

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Inside a DAG: a new task of it (its value, when given to another task, is this task's return
        value; a task id already taken gets ``__1``, ``__2``... as in Airflow). Outside: the function."""
        from tock.dag import current_dag

        dag = current_dag()
        if dag is None:
            return self.function(*args, **kwargs)
        return _new_task(None, _unique_id(dag, self.task_id), "python", self.options,
                         python_callable=self.function, args=args, kwargs=kwargs)

    def override(self, **changes: Any) -> TaskFunction:
        """This task function with other options (``task_id``, ``retries``...), as Airflow's ``override``."""
        task_id = changes.pop("task_id", self.task_id)
        options = {item.name: getattr(self.options, item.name) for item in fields(TaskOptions)}
        return TaskFunction(self.function, task_id, TaskOptions(**{**options, **changes}))


def _unique_id(dag: DAG, task_id: str) -> str:
    if task_id not in dag.tasks:
        return task_id
    stem = re.sub(r"__\d+$", "", task_id)
    number = 1
    while f"{stem}__{number}" in dag.tasks:
        number += 1
    return f"{stem}__{number}"


@overload
def task(function: Callable[..., Any], *, task_id: str | None = None, **options: Any) -> TaskFunction: ...


@overload
def task(function: None = None, *, task_id: str | None = None,
         **options: Any) -> Callable[[Callable[..., Any]], TaskFunction]: ...


def task(function: Callable[..., Any] | None = None, *, task_id: str | None = None,
         **options: Any) -> TaskFunction | Callable[[Callable[..., Any]], TaskFunction]:
    """Declare a Python task: ``@task`` or ``@task(retries=2, executor="celery", ...)``.

    Options: retries, retry_delay (seconds or timedelta), execution_timeout, deadline (seconds or a
    timedelta after the task instance is first queued in a run: `tock monitor` writes a
    TaskDeadlineMissed if it has not ended by then), executor ("local" | "celery" | "kubernetes"),
    queue, pod_override ({"image", "resources"}), multiple_outputs (a returned dict is also passed on
    key by key; default: whether the function is annotated ``-> dict``), do_xcom_push (default True).
    Called inside a DAG with other tasks (or their ``["key"]``) as arguments, it depends on them and
    receives their values when it runs.
    """
    task_options = TaskOptions(**options)

    def decorate(inner: Callable[..., Any]) -> TaskFunction:
        if not callable(inner):
            raise TypeError(f"@task decorates a function, not {inner!r}")
        return TaskFunction(inner, task_id, task_options)

    return decorate if function is None else decorate(function)
