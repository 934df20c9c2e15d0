"""Tasks of a DAG: ``Task`` (what ``@task``, ``BashTask`` and the operators create), its options, and
``>>`` / ``<<`` dependencies between tasks, their values, lists and task groups."""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, fields
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from schemas.dags import ExternalWaitDefinition, MarkerDefinition, SensorDefinition, TimeWaitDefinition
from tock.callbacks import TASK_CALLBACKS, callbacks_of
from tock.metadata import DEFAULT_OWNER, TaskDoc, task_metadata_problems
from tock.params import NOTSET
from tock.trigger_rules import TriggerRule, trigger_rule_problem, trigger_rule_value
from tock.values import RETURN_VALUE
from tock.weight_rules import WeightRule, priority_weight_problem, weight_rule_problem, weight_rule_value

if TYPE_CHECKING:
    from tock.dag import DAG
    from tock.mapping import MapSpec, OperatorPartial
    from tock.task_group import TaskGroup
    from tock.virtualenv import Interpreter

# What a dependency may link: a task, its value, a task group, or a list of them.
Linkable = TypeVar("Linkable", bound="Task | XComArg | TaskGroup | Iterable[Task | XComArg | TaskGroup]")

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
    # Python tasks (Airflow's PythonOperator arguments): a dict rendered as templates, given to the
    # task as ``templates_dict``; file extensions whose strings in templated fields name template files.
    templates_dict: dict[str, Any] | None = None
    templates_exts: tuple[str, ...] | list[str] | None = None
    params: dict[str, Any] | None = None  # the task's own params (values or tock.Param), over the DAG's
    trigger_rule: str | TriggerRule | None = None  # None: all_success (teardowns: all_done_setup_success)
    # Airflow's task callbacks (tock/callbacks.py): a function or a list of them, called by `tock monitor`.
    on_success_callback: Any = None
    on_failure_callback: Any = None
    on_retry_callback: Any = None
    on_execute_callback: Any = None
    on_skipped_callback: Any = None
    # Priorities and limits (Airflow's names): the task's weight and how it adds up to its priority,
    # its tries queued or running at once across the DAG's runs and within one run (None: no limit).
    priority_weight: int = 1
    weight_rule: str | WeightRule = WeightRule.DOWNSTREAM
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None
    # The retry delay doubles with each try (with a jitter), at most max_retry_delay.
    retry_exponential_backoff: bool = False
    max_retry_delay: float | timedelta | None = None
    max_map_length: int | None = None  # a mapped task's most instances; None: 1024 (Airflow's core.max_map_length)
    # Airflow's pools: the pool whose slots its tries take while queued or running, and how many.
    # None or "default_pool": no pool (Airflow's default_pool, which has no cap in Tock).
    pool: str | None = None
    pool_slots: int = 1
    # Airflow's lineage: the assets (and asset aliases) a success of the task updates, and those it reads
    # (``inlets``: recorded, not scheduled on).
    outlets: Any = None
    inlets: Any = None
    # Airflow's descriptive arguments and those Tock takes only where Airflow would do nothing Tock lacks
    # (tock/metadata.py): its owner and docs; depends_on_past only False; email only with no mail to send.
    owner: str = DEFAULT_OWNER
    doc_md: str | None = None
    doc: str | None = None
    depends_on_past: bool = False
    email: str | Collection[str] | None = None
    email_on_failure: bool = True
    email_on_retry: bool = True

    def problems(self) -> list[str]:
        """What is wrong with these options, in words (empty when valid)."""
        found: list[str] = []
        if self.retries is not None and (not isinstance(self.retries, int) or self.retries < 0):
            found.append(f"retries must be a non-negative integer, got {self.retries!r}")
        durations = {"retry_delay": self.retry_delay, "execution_timeout": self.execution_timeout,
                     "deadline": self.deadline, "max_retry_delay": self.max_retry_delay}
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
        found.extend(_template_option_problems(self.templates_dict, self.templates_exts))
        found.extend(_params_problems(self.params))
        if self.trigger_rule is not None and trigger_rule_problem(self.trigger_rule):
            found.append(str(trigger_rule_problem(self.trigger_rule)))
        found.extend(self._callback_problems())
        found.extend(self._limit_problems())
        found.extend(_max_map_length_problems(self.max_map_length))
        found.extend(_pool_problems(self.pool, self.pool_slots))
        found.extend(_asset_problems(self.outlets, self.inlets))
        found.extend(task_metadata_problems(self))
        return found

    def _limit_problems(self) -> list[str]:
        """What is wrong with the priority, limit and backoff options."""
        found = [problem for problem in (priority_weight_problem(self.priority_weight),
                                         weight_rule_problem(self.weight_rule)) if problem]
        for name in ("max_active_tis_per_dag", "max_active_tis_per_dagrun"):
            limit = getattr(self, name)
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                found.append(f"{name} must be None or a positive integer, got {limit!r}")
        if not isinstance(self.retry_exponential_backoff, bool):
            found.append(f"retry_exponential_backoff must be True or False, got {self.retry_exponential_backoff!r}")
        return found

    def callbacks(self) -> dict[str, list[str]]:
        """Trigger -> the targets of this task's callbacks (ValueError if one cannot be called)."""
        return callbacks_of({name: getattr(self, name) for name in TASK_CALLBACKS}, TASK_CALLBACKS)

    def _callback_problems(self) -> list[str]:
        try:
            self.callbacks()
        except ValueError as error:
            return [str(error)]
        return []

    def pod_override_json(self) -> str | None:
        return None if self.pod_override is None else json.dumps(self.pod_override, sort_keys=True)


def _pool_problems(pool: Any, slots: Any) -> list[str]:
    found = []
    if pool is not None and (not isinstance(pool, str) or not ID_PATTERN.match(pool)):
        found.append(f"pool must be a pool's name (letters, digits, '_', '.', '-'), got {pool!r}")
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        found.append(f"pool_slots must be a positive integer, got {slots!r}")
    return found


def _asset_problems(outlets: Any, inlets: Any) -> list[str]:
    from tock.assets import outlets_of

    found = []
    for name, given in (("outlets", outlets), ("inlets", inlets)):
        try:
            outlets_of(given, "")
        except ValueError:
            found.append(f"{name} must be a list of Asset or AssetAlias objects, got {given!r:.200}")
    return found


def _max_map_length_problems(value: Any) -> list[str]:
    from tock.mapping import max_map_length_problems

    return max_map_length_problems(value)


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


def _template_option_problems(templates_dict: Any, templates_exts: Any) -> list[str]:
    found = []
    if templates_dict is not None and not isinstance(templates_dict, dict):
        found.append(f"templates_dict must be a dict, got {templates_dict!r}")
    if templates_exts is not None and (not isinstance(templates_exts, list | tuple)
                                       or not all(isinstance(ext, str) and ext for ext in templates_exts)):
        found.append(f"templates_exts must be a list of file extensions like '.sql', got {templates_exts!r}")
    return found


# Airflow's templated fields and template file extensions, per kind of task (tock/templating.py).
TEMPLATE_FIELDS = {"bash": ("bash_command", "env", "cwd"), "python": ("templates_dict", "op_args", "op_kwargs"),
                   "empty": (), "sensor": ("templates_dict", "op_args", "op_kwargs"),  # @task.sensor's as @task's
                   "external_sensor": (), "time_sensor": (), "operator": ()}  # a BaseOperator's: its class's
# Options only a Python task has (a group's default_args gives them to its Python tasks only).
PYTHON_ONLY_OPTIONS = ("templates_dict", "templates_exts", "multiple_outputs")
BASH_TEMPLATE_EXT = (".sh", ".bash")
TASK_OPTION_NAMES = tuple(item.name for item in fields(TaskOptions))  # what default_args may hold


def defaults_for_kind(default_args: dict[str, Any], kind: str) -> dict[str, Any]:
    """The default_args a task of ``kind`` takes (Python-only options go to Python tasks only)."""
    if kind in ("python", "sensor"):
        return dict(default_args)
    return {key: value for key, value in default_args.items() if key not in PYTHON_ONLY_OPTIONS}


def default_args_problem(default_args: Any) -> str | None:
    """What is wrong with a DAG's or a task group's ``default_args`` (None: nothing)."""
    if not isinstance(default_args, dict):
        return f"default_args must be a dict, got {default_args!r}"
    unknown = sorted(str(key) for key in default_args if key not in TASK_OPTION_NAMES)
    if not unknown:
        return None
    return (f"default_args has {', '.join(map(repr, unknown))}, which "
            f"{'is not a task option' if len(unknown) == 1 else 'are not task options'} (task options: "
            f"{', '.join(TASK_OPTION_NAMES)})")


class Links:
    """``>>`` and ``<<`` for what links by ``set_downstream`` / ``set_upstream`` (tasks, task groups),
    on either side of a list: ``a >> b`` returns b, ``[a, b] >> c`` returns c."""

    def set_downstream(self, others: Any) -> None:
        raise NotImplementedError

    def set_upstream(self, others: Any) -> None:
        raise NotImplementedError

    def __rshift__(self, other: Linkable) -> Linkable:
        self.set_downstream(other)
        return other

    def __lshift__(self, other: Linkable) -> Linkable:
        self.set_upstream(other)
        return other

    def __rrshift__(self, other: Iterable[Any]) -> Self:  # [a, b] >> self
        self.set_upstream(other)
        return self

    def __rlshift__(self, other: Iterable[Any]) -> Self:  # [a, b] << self
        self.set_downstream(other)
        return self


@dataclass(eq=False)
class Task(Links):
    """One task of a DAG. Build it with ``@task``, ``BashTask`` or an operator, not directly."""

    task_id: str  # its full id: inside a group that prefixes, "group.task"
    kind: str  # "python", "bash", "empty" (the scheduler succeeds it without running anything) or "sensor"
    dag: DAG
    options: TaskOptions
    python_callable: Callable[..., Any] | None = None
    command: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] | None = None  # bash: None inherits the environment; else it is the environment,
    append_env: bool = False  # or, with append_env, is added to it (Airflow's BashOperator)
    cwd: str | None = None  # bash: the folder the command runs in
    skip_on_exit_code: tuple[int, ...] = (99,)  # bash: exit statuses that end the try skipped (Airflow's)
    upstream_task_ids: set[str] = field(default_factory=set)
    downstream_task_ids: set[str] = field(default_factory=set)
    task_group: TaskGroup | None = None  # the innermost group it was created in
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False  # a teardown's failure fails its run only with this
    chooses: str = ""  # "branch" (its return value names what follows) or "short_circuit" (whether anything does)
    ignore_downstream_trigger_rules: bool = True  # a short circuit's falsy value skips all downstream
    trigger_rule_given: bool = False  # the DAG file set its trigger rule (a teardown's cannot be)
    mapped: MapSpec | None = None  # a mapped task (tock/mapping.py): what its instances map over
    sensor: SensorDefinition | None = None  # a sensor (kind "sensor", tock/sensors.py): how it waits
    external: ExternalWaitDefinition | None = None  # an external task sensor (tock/external.py): what it awaits
    time_wait: TimeWaitDefinition | None = None  # a time sensor with its moment known (kind "time_sensor")
    marker: MarkerDefinition | None = None  # an ExternalTaskMarker (tock/external.py): what it clears
    # A Python task whose function runs in another interpreter (tock/virtualenv.py): a virtualenv, or a path.
    interpreter: Interpreter | None = None
    # An operator's arguments ``.expand()`` may map over -> the attribute each sets (tock/mapping.py);
    # the required ones a mapped operator is built with until each instance's element gives them.
    mappable_arguments: ClassVar[dict[str, str]] = {}
    mapped_placeholders: ClassVar[dict[str, Any]] = {}

    @classmethod
    def partial(cls, **kwargs: Any) -> OperatorPartial:
        """``Operator.partial(task_id=..., ...)``: the fixed arguments of a mapped operator, then
        ``.expand(...)`` or ``.expand_kwargs(...)`` (Airflow's)."""
        from tock.mapping import OperatorPartial

        return OperatorPartial(cls, kwargs)

    @property
    def is_mapped(self) -> bool:
        return self.mapped is not None

    def __post_init__(self) -> None:
        self.dag.add_task(self)
        if self.task_group is not None:
            self.task_group.add(self)

    @property
    def label(self) -> str:
        """Its id inside its group (Airflow's ``label``): the task id without the group's prefix."""
        group = self.task_group
        if group is None or not group.prefix_group_id:
            return self.task_id
        return self.task_id.removeprefix(f"{group.group_id}.")

    @property
    def trigger_rule(self) -> str:
        if self.options.trigger_rule is None:
            return TriggerRule.ALL_SUCCESS.value
        return trigger_rule_value(self.options.trigger_rule)

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
    def priority_weight(self) -> int:
        return self.options.priority_weight

    @property
    def weight_rule(self) -> str:
        return weight_rule_value(self.options.weight_rule)

    @property
    def max_active_tis_per_dag(self) -> int | None:
        return self.options.max_active_tis_per_dag

    @property
    def max_active_tis_per_dagrun(self) -> int | None:
        return self.options.max_active_tis_per_dagrun

    @property
    def retry_exponential_backoff(self) -> bool:
        return self.options.retry_exponential_backoff

    @property
    def max_retry_delay(self) -> float | None:
        return seconds_of(self.options.max_retry_delay, "max_retry_delay")

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

    def map(self, function: Callable[[Any], Any]) -> XComArg:
        """This task's return value with ``function`` applied to each element a mapped task gets from it
        (``XComArg.map``)."""
        return self.output.map(function)

    def zip(self, *others: Task | XComArg, fillvalue: Any = NOTSET) -> ZipXComArg:
        """This task's return value zipped with others' (``XComArg.zip``)."""
        return self.output.zip(*others, fillvalue=fillvalue)

    @property
    def operator(self) -> Task:
        """The task itself (what Airflow's XComArg.operator names), so a @task call's result reads
        the same whether it is treated as a task or as its value."""
        return self

    def __getitem__(self, key: str) -> XComArg:
        """The value this task passes on under ``key`` (with ``multiple_outputs``: a key of its dict)."""
        return XComArg(self, key)

    # Templating (tock/templating.py): the fields rendered before the try runs, by Airflow's names.
    @property
    def template_fields(self) -> tuple[str, ...]:
        return TEMPLATE_FIELDS[self.kind]

    @property
    def template_ext(self) -> tuple[str, ...]:
        return BASH_TEMPLATE_EXT if self.kind == "bash" else tuple(self.options.templates_exts or ())

    @property
    def bash_command(self) -> str:
        return self.command

    @property
    def op_args(self) -> list[Any]:
        return list(self.args)

    @property
    def op_kwargs(self) -> dict[str, Any]:
        return self.kwargs

    @property
    def templates_dict(self) -> dict[str, Any] | None:
        return self.options.templates_dict

    # Its docs (Airflow's): its options', which setting them afterwards (``t1.doc_md = ...``) replaces.
    doc_md = TaskDoc()
    doc = TaskDoc()

    def set_downstream(self, others: Task | XComArg | TaskGroup | Iterable[Task | XComArg | TaskGroup]) -> None:
        """Make ``others`` downstream of this task (a group: its roots)."""
        for other in dependency_ends(others, upstream=False):
            self.dag.check_same_dag(self, other)
            self.downstream_task_ids.add(other.task_id)
            other.upstream_task_ids.add(self.task_id)

    def set_upstream(self, others: Task | XComArg | TaskGroup | Iterable[Task | XComArg | TaskGroup]) -> None:
        """Make ``others`` upstream of this task (a group: its leaves)."""
        for other in dependency_ends(others, upstream=True):
            other.set_downstream(self)

    # Setup and teardown (tock/setup_teardown.py).
    def as_setup(self) -> Task:
        """Mark this task a setup (Airflow's ``as_setup``); returns it."""
        from tock.setup_teardown import mark_setup

        return mark_setup(self)

    def as_teardown(self, *, setups: Task | XComArg | Iterable[Task | XComArg] | None = None,
                    on_failure_fail_dagrun: bool | None = None) -> Task:
        """Mark this task a teardown of ``setups`` (each marked a setup, linked ``setup >> self``);
        its trigger rule becomes all_done_setup_success. Returns it."""
        from tock.setup_teardown import mark_teardown

        return mark_teardown(self, setups, on_failure_fail_dagrun)

    def __enter__(self) -> Task:
        """``with setup >> teardown:``: the tasks created inside run between them."""
        from tock.setup_teardown import enter_scope

        enter_scope(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        from tock.setup_teardown import exit_scope

        exit_scope(self, error is None)

    def __repr__(self) -> str:
        return f"<Task {self.dag.dag_id}.{self.task_id} ({self.kind})>"


@dataclass(frozen=True, eq=False)
class XComArg:
    """A value a task passes on (its return value, or one key of it), used as another task's argument:
    ``load(transform(extract())["total"])`` makes the dependencies and passes the values at run time.
    It links like its task (``>>``, ``<<``)."""

    operator: Task
    key: str = RETURN_VALUE
    # ``.map(fn)``: functions applied, in order, to each element a mapped task gets from this value
    # (in the try, not the scheduler: the number of instances is the value's length).
    transforms: tuple[Callable[[Any], Any], ...] = ()

    def __getitem__(self, key: str) -> XComArg:
        return XComArg(self.operator, key)

    def map(self, function: Callable[[Any], Any]) -> XComArg:
        """This value with ``function`` applied to each of its elements when a task is mapped over it
        (Airflow's ``XComArg.map``): the mapped task's instance N gets ``function(element N)``; a function
        that raises AirflowSkipException skips that instance."""
        if not callable(function):
            raise TypeError(f"XComArg.map() takes a function, not {function!r}")
        return XComArg(self.operator, self.key, (*self.transforms, function))

    def zip(self, *others: Task | XComArg, fillvalue: Any = NOTSET) -> ZipXComArg:
        """This value zipped with other tasks' values (Airflow's ``XComArg.zip``): element N is the tuple of
        their elements N, as many as the shortest has; with ``fillvalue``, as many as the longest has,
        the shorter ones filled with it. Mapping over it gives one instance per tuple."""
        return ZipXComArg.of((self, *others), fillvalue)

    def set_downstream(self, others: Any) -> None:
        self.operator.set_downstream(others)

    def set_upstream(self, others: Any) -> None:
        self.operator.set_upstream(others)

    def __rshift__(self, other: Linkable) -> Linkable:
        return self.operator.__rshift__(other)

    def __lshift__(self, other: Linkable) -> Linkable:
        return self.operator.__lshift__(other)

    def __rrshift__(self, other: Iterable[Task | XComArg | TaskGroup]) -> Task:
        return self.operator.__rrshift__(other)

    def __rlshift__(self, other: Iterable[Task | XComArg | TaskGroup]) -> Task:
        return self.operator.__rlshift__(other)

    def __enter__(self) -> Task:
        return self.operator.__enter__()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.operator.__exit__(kind, error, trace)

    def __repr__(self) -> str:
        return f"<XComArg {self.operator.task_id}[{self.key!r}]>"


@dataclass(frozen=True, eq=False)
class ZipXComArg:
    """Upstream values zipped (``a.zip(b, c, fillvalue=...)``): what a task maps over, one instance per
    tuple, or an argument (the list of the tuples). ``.map(fn)`` applies ``fn`` to each tuple."""

    args: tuple[XComArg, ...]
    fillvalue: Any = NOTSET
    transforms: tuple[Callable[[Any], Any], ...] = ()

    @classmethod
    def of(cls, values: tuple[Task | XComArg, ...], fillvalue: Any) -> ZipXComArg:
        args = tuple(value.output if isinstance(value, Task) else value for value in values)
        wrong = next((value for value in args if not isinstance(value, XComArg)), None)
        if wrong is not None:
            raise TypeError(f"zip() zips tasks' values (a task, or its .output / [key]), not {wrong!r}")
        if fillvalue is not NOTSET and any(arg.transforms for arg in args):
            raise TypeError("zip() with a fillvalue cannot zip a .map()ped value (its fill would not be mapped): "
                            "map the zip instead, a.zip(b, fillvalue=...).map(function)")
        return cls(args, fillvalue)

    @property
    def operators(self) -> list[Task]:
        return [arg.operator for arg in self.args]

    def map(self, function: Callable[[Any], Any]) -> ZipXComArg:
        """The zip with ``function`` applied to each tuple a mapped task gets from it."""
        if not callable(function):
            raise TypeError(f"ZipXComArg.map() takes a function, not {function!r}")
        return ZipXComArg(self.args, self.fillvalue, (*self.transforms, function))

    def zipped(self, columns: list[Any]) -> list[tuple[Any, ...]]:
        """The tuples of the zipped values ``columns`` (each already read), as an argument gets them."""
        import itertools

        lists = [list(column) if column is not None else [] for column in columns]
        rows = (zip(*lists, strict=False) if self.fillvalue is NOTSET
                else itertools.zip_longest(*lists, fillvalue=self.fillvalue))
        return [self.element(tuple(row)) for row in rows]

    def element(self, row: tuple[Any, ...]) -> Any:
        """One tuple as the task gets it: each value through its own ``.map()``, then the zip's."""
        value: Any = tuple(through(arg.transforms, item) for arg, item in zip(self.args, row, strict=True))
        return through(self.transforms, value)

    def __repr__(self) -> str:
        return f"<ZipXComArg {', '.join(arg.operator.task_id for arg in self.args)}>"


def through(functions: tuple[Callable[[Any], Any], ...], value: Any) -> Any:
    """``value`` through each ``.map()`` function in turn."""
    for function in functions:
        value = function(value)
    return value


def value_references(value: Any, seen: set[int] | None = None) -> list[Task]:
    """The tasks whose values ``value`` (an argument of a task, containers included) refers to; a
    container that holds itself is walked once."""
    if isinstance(value, Task):
        return [value]
    if isinstance(value, XComArg):
        return [value.operator]
    if isinstance(value, ZipXComArg):
        return value.operators
    if not isinstance(value, list | tuple | set | frozenset | dict):
        return []
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    items = value.values() if isinstance(value, dict) else value
    return [task for item in items for task in value_references(item, seen)]


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


def dependency_ends(others: Any, *, upstream: bool) -> list[Task]:
    """The tasks a dependency links for ``others`` (a task, a value, a task group, or a list of them):
    a group is its leaves on the upstream side of ``>>`` and its roots on the downstream side."""
    from tock.task_group import TaskGroup

    items = list(others) if isinstance(others, list | tuple | set | frozenset) else [others]
    found: list[Task] = []
    for item in items:
        if isinstance(item, XComArg):
            item = item.operator
        if isinstance(item, TaskGroup):
            found.extend(item.dependency_ends(upstream=upstream))
        elif isinstance(item, Task):
            found.append(item)
        else:
            raise TypeError(f"dependencies link tasks, their values and task groups, not {item!r}")
    return found


def prepare_task(dag: DAG | None, label: Any, kind: str, given: dict[str, Any],
                 unique: bool = False) -> tuple[DAG, str, TaskOptions, TaskGroup | None]:
    """The DAG, full task id, options and group of a task about to be created: inside a group its id
    is prefixed and the group's default_args fill the options it was not given; refused (a
    DagDefinitionError) if the id or an option is invalid. ``unique``: a taken id gets ``__1``..."""
    from tock.dag import current_dag
    from tock.task_group import current_group

    owner = dag or current_dag()
    if owner is None:
        raise RuntimeError(f"task {label!r} must be created inside a `with DAG(...)` block or given dag=")
    group = current_group(owner)
    task_id = group.child_id(label) if group is not None and isinstance(label, str) else label
    if unique:
        task_id = unique_task_id(owner, task_id)
    defaults = {**owner.defaults_for(kind), **(group.defaults_for(kind) if group is not None else {})}
    options = TaskOptions(**{**defaults, **given})
    owner.check_task(task_id, options)
    return owner, task_id, options, group


def unique_task_id(dag: DAG, task_id: str) -> str:
    """``task_id``, or with ``__1``, ``__2``... when it is taken (Airflow's rule for decorated tasks)."""
    if task_id not in dag.tasks:
        return task_id
    stem = re.sub(r"__\d+$", "", task_id)
    number = 1
    while f"{stem}__{number}" in dag.tasks:
        number += 1
    return f"{stem}__{number}"


def init_task(created: Task, dag: DAG | None, label: Any, kind: str, given: dict[str, Any],
              unique: bool = False, **fields: Any) -> None:
    """Initialise ``created`` (a Task or an operator, which are Tasks) as a new task of its DAG; it
    depends on the tasks whose values its arguments name."""
    owner, task_id, options, group = prepare_task(dag, label, kind, given, unique)
    Task.__init__(created, task_id=task_id, kind=kind, dag=owner, options=options, task_group=group,
                  trigger_rule_given="trigger_rule" in given, **fields)
    arguments = [*created.args, *created.kwargs.values()]
    created.set_upstream([upstream for value in arguments for upstream in value_references(value)])


def _new_task(dag: DAG | None, task_id: str, kind: str, given: dict[str, Any], unique: bool = False,
              **fields: Any) -> Task:
    created = Task.__new__(Task)
    init_task(created, dag, task_id, kind, given, unique, **fields)
    return created


def BashTask(task_id: str, command: str | None = None, *, bash_command: str | None = None,  # noqa: N802
             env: dict[str, str] | None = None, append_env: bool = False, cwd: str | None = None,
             skip_on_exit_code: int | Collection[int] | None = 99, dag: DAG | None = None, **options: Any) -> Task:
    """A task that runs ``command`` (or Airflow's ``bash_command=``) with bash. ``env``: the command's
    whole environment, or with ``append_env=True`` added to the inherited one; ``cwd``: where it runs.
    ``skip_on_exit_code`` (Airflow's, default 99; an int, several, or None): an exit status that ends
    the try skipped instead of failed.
    Command, env and cwd are templates (tock/templating.py); a command ending in ``.sh`` or ``.bash`` names
    a template file next to the DAG file or in its ``template_searchpath``. Options as for ``@task``."""
    if (command is None) == (bash_command is None):
        raise ValueError(f"BashTask {task_id!r} takes its command once: as command or as bash_command=")
    command = command if command is not None else bash_command
    return _new_task(dag, task_id, "bash", options,
                     **bash_fields(task_id, command, env, append_env, cwd, skip_on_exit_code, options))


def bash_fields(task_id: str, command: Any, env: Any, append_env: Any, cwd: Any, skip_on_exit_code: Any,
                options: dict[str, Any]) -> dict[str, Any]:
    """A bash task's fields, checked (a mistake is a ValueError naming the task and the field)."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"BashTask {task_id!r} needs a non-empty command string")
    _check_bash_fields(task_id, env, append_env, cwd, options)
    return {"command": command, "env": env, "append_env": append_env, "cwd": cwd,
            "skip_on_exit_code": _exit_codes(task_id, skip_on_exit_code)}


def _exit_codes(task_id: str, given: Any) -> tuple[int, ...]:
    """``skip_on_exit_code`` as the statuses it names: None names none, an int one, a collection its ints."""
    codes = () if given is None else (given,) if isinstance(given, int) else given
    if not isinstance(codes, (tuple, list, set, frozenset)) or not all(_is_exit_status(code) for code in codes):
        raise ValueError(f"BashTask {task_id!r}: skip_on_exit_code must be an exit status (0-255), a list of "
                         f"them or None, got {given!r}")
    return tuple(sorted(set(codes)))


def _is_exit_status(code: Any) -> bool:
    return isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 255


def _check_bash_fields(task_id: str, env: Any, append_env: Any, cwd: Any, options: dict[str, Any]) -> None:
    if env is not None and (not isinstance(env, dict) or not all(isinstance(key, str) and isinstance(value, str)
                                                                 for key, value in env.items())):
        raise ValueError(f"BashTask {task_id!r}: env must be a dict of strings to strings, got {env!r}")
    if not isinstance(append_env, bool):
        raise ValueError(f"BashTask {task_id!r}: append_env must be True or False, got {append_env!r}")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise ValueError(f"BashTask {task_id!r}: cwd must be a non-empty string, got {cwd!r}")
    python_only = sorted(name for name in ("templates_dict", "templates_exts") if options.get(name) is not None)
    if python_only:
        raise ValueError(f"BashTask {task_id!r}: {', '.join(python_only)} is for Python tasks")
