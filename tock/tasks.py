"""Tasks of a DAG: ``@task`` functions, ``BashTask`` commands, and ``>>`` / ``<<`` dependencies."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from tock.dag import DAG

Downstream = TypeVar("Downstream", bound="Task | Iterable[Task]")

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
    params: dict[str, Any] | None = None  # the task's own params (values or tock.Param), over the DAG's

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
        found.extend(_pod_override_problems(self.pod_override))
        found.extend(_params_problems(self.params))
        return found

    def pod_override_json(self) -> str | None:
        return None if self.pod_override is None else json.dumps(self.pod_override, sort_keys=True)


def _params_problems(params: Any) -> list[str]:
    from tock.params import definition_problems, params_of, to_params_json

    try:
        checked = params_of(params, "params")
        to_params_json(checked)
    except (TypeError, ValueError) as error:
        return [str(error)]
    return definition_problems(checked, scheduled=False)


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

    def set_downstream(self, others: Task | Iterable[Task]) -> None:
        for other in _tasks_of(others):
            self.dag.check_same_dag(self, other)
            self.downstream_task_ids.add(other.task_id)
            other.upstream_task_ids.add(self.task_id)

    def set_upstream(self, others: Task | Iterable[Task]) -> None:
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


def _tasks_of(others: Task | Iterable[Task]) -> list[Task]:
    items = [others] if isinstance(others, Task) else list(others)
    for item in items:
        if not isinstance(item, Task):
            raise TypeError(f"dependencies link tasks, not {item!r}")
    return items


def _new_task(dag: DAG | None, task_id: str, kind: str, options: TaskOptions, **fields: Any) -> Task:
    from tock.dag import current_dag

    owner = dag or current_dag()
    if owner is None:
        raise RuntimeError(f"task {task_id!r} must be created inside a `with DAG(...)` block or given dag=")
    owner.check_task(task_id, options)
    return Task(task_id=task_id, kind=kind, dag=owner, options=options, **fields)


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
        from tock.dag import current_dag

        if current_dag() is None:
            return self.function(*args, **kwargs)
        return _new_task(None, self.task_id, "python", self.options, python_callable=self.function,
                         args=args, kwargs=kwargs)


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
    queue, pod_override ({"image", "resources"}).
    """
    task_options = TaskOptions(**options)

    def decorate(inner: Callable[..., Any]) -> TaskFunction:
        if not callable(inner):
            raise TypeError(f"@task decorates a function, not {inner!r}")
        return TaskFunction(inner, task_id, task_options)

    return decorate if function is None else decorate(function)
