"""The task context: what a running try knows of itself, as Airflow's context has it.

A try's context is recorded in the log when it is queued (its TaskQueued: the run's dates and type,
its conf, the params resolved for it, the values of its upstream tries), and the runner builds the
context from that record only, so running the same try again from the same record sees the same
context (``tock tasks test ... --replay``). Inside a task, ``get_current_context()`` returns it; a
``@task`` function also gets its keys as keyword arguments it names (``ti``, ``params``,
``logical_date``...) or all of them through ``**context``.

Values pass along dependencies: ``ti.xcom_pull(task_ids=...)`` reads the values of the task's
upstream tries, the ones its TaskQueued names, and its own pushes. A task that is not upstream
is refused with a message saying so, where Airflow would race with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tock.values import RETURN_VALUE, decode_values

if TYPE_CHECKING:
    from schemas import TaskQueued, TryInput
    from tock.dag import DAG
    from tock.tasks import Task

_NOT_GIVEN: Any = object()


class Context(dict[str, Any]):
    """The context of a running try (a dict, as Airflow's)."""


class ValueNotPassed(LookupError):
    """A task asked for a value Tock does not pass to it (not upstream, or too large to carry)."""


_current: list[Context] = []


def get_current_context() -> Context:
    """The context of the try running in this process (Airflow's ``get_current_context``)."""
    if not _current:
        raise RuntimeError("get_current_context() was called outside a running task: there is no context "
                           "(inside a task, or in dag.test(), there is one)")
    return _current[-1]


@contextmanager
def current(context: Context) -> Iterator[Context]:
    """Make ``context`` the current one while the try's user code runs."""
    _current.append(context)
    try:
        yield context
    finally:
        _current.remove(context)


@dataclass
class DagRunInfo:
    """The run a try belongs to (Airflow's ``dag_run``), as its TaskQueued recorded it."""

    dag_id: str
    run_id: str
    run_type: str
    logical_date: datetime | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    conf: dict[str, Any] = field(default_factory=dict)


class RuntimeTaskInstance:
    """The running try (Airflow's ``ti``): its ids, and the values it reads and pushes."""

    def __init__(self, task: Task, run_id: str, try_number: int, inputs: Iterable[TryInput],
                 map_index: int = -1) -> None:
        self.task, self.dag_id, self.task_id = task, task.dag.dag_id, task.task_id
        self.run_id, self.try_number, self.map_index = run_id, try_number, map_index
        inputs = list(inputs)
        self._inputs = {item.task_id: item for item in inputs if item.map_index < 0}
        # A mapped upstream's instances, in map index order (tock/mapping.py): its value is their list.
        self._mapped: dict[str, list[TryInput]] = {}
        for item in sorted((item for item in inputs if item.map_index >= 0), key=lambda item: item.map_index):
            self._mapped.setdefault(item.task_id, []).append(item)
        self._decoded: dict[str, dict[str, Any]] = {}
        self.pushed: dict[str, Any] = {}  # what this try passes on, key -> value
        # Commands the try asks the runner to append before its success (TriggerDagRunOperator's runs):
        # each a dict of TriggerDagRun's fields (tock/trigger_dagrun.py).
        self.commands: list[dict[str, Any]] = []

    def xcom_push(self, key: str, value: Any) -> None:
        """Pass ``value`` on under ``key``, with this try's success (encoded when the try ends)."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"xcom_push needs a non-empty string key, got {key!r}")
        self.pushed[key] = value

    def xcom_pull(self, task_ids: str | Iterable[str] | None = None, dag_id: str | None = None,
                  key: str = RETURN_VALUE, include_prior_dates: bool = False, *,
                  map_indexes: int | Iterable[int] | None = None, default: Any = None,
                  run_id: str | None = None) -> Any:
        """The value ``key`` of an upstream task (a str), or a list of them (several task ids); ``default``
        where it passed none. ``task_ids=None``: this try's own pushes."""
        self._refuse_outside_run(dag_id, run_id, include_prior_dates)
        if task_ids is None or isinstance(task_ids, str):
            return self._value(task_ids or self.task_id, key, default, map_indexes)
        return [self._value(task_id, key, default, map_indexes) for task_id in task_ids]

    def mapped_values(self, task_id: str, key: str, map_indexes: int | Iterable[int] | None = None) -> Any:
        """The values ``key`` of a mapped upstream's instances: a list in map index order (None where one
        passed none), or one instance's (``map_indexes`` an int), or those of some (an iterable)."""
        by_index = {item.map_index: item for item in self._mapped.get(task_id, [])}

        def value(index: int) -> Any:
            found = by_index.get(index)
            return None if found is None else decode_values(self._checked(found).values_json).get(key)

        if isinstance(map_indexes, int):
            return value(map_indexes)
        return [value(index) for index in (sorted(by_index) if map_indexes is None else map_indexes)]

    def is_mapped_input(self, task_id: str) -> bool:
        return task_id in self._mapped

    def values_of(self, task_id: str) -> dict[str, Any]:
        """Every value an upstream task's try passed on, key -> value."""
        if task_id not in self._decoded:
            self._decoded[task_id] = decode_values(self._input(task_id).values_json)
        return self._decoded[task_id]

    def input_try(self, task_id: str) -> int | None:
        """Which try of an upstream task this try reads the values of (None: it passed none)."""
        found = self._inputs.get(task_id)
        return None if found is None else found.try_number

    def _value(self, task_id: str, key: str, default: Any, map_indexes: int | Iterable[int] | None) -> Any:
        if self.is_mapped_input(task_id):
            upstream = self.task.dag.tasks.get(task_id)
            if map_indexes is None and upstream is not None and _same_mapped_group(self.task, upstream):
                map_indexes = self.map_index  # in a mapped task group: the instance of this map index (Airflow's)
            return self.mapped_values(task_id, key, map_indexes)
        if map_indexes not in (None, -1):
            raise ValueNotPassed(f"xcom_pull(map_indexes={map_indexes!r}): task {task_id!r} is not mapped")
        if task_id == self.task_id:
            return self.pushed.get(key, default)
        if task_id not in self.task.upstream_task_ids:
            raise ValueNotPassed(f"task {self.task_id!r} pulled a value of {task_id!r}, which is not upstream of it: "
                                 f"Tock passes values along dependencies only (add {task_id} >> {self.task_id})")
        if task_id not in self._inputs:
            return default  # it ended without passing anything (skipped, removed, returned None)
        return self.values_of(task_id).get(key, default)

    def _input(self, task_id: str) -> TryInput:
        return self._checked(self._inputs[task_id])

    def _checked(self, found: TryInput) -> TryInput:
        task_id = found.task_id
        if found.left_out:
            raise ValueNotPassed(f"the values of {task_id!r} (try {found.try_number}) were not passed to "
                                 f"{self.task_id!r}: its inputs together were larger than a queued try may carry")
        return found

    def _refuse_outside_run(self, dag_id: str | None, run_id: str | None, include_prior_dates: bool) -> None:
        if dag_id not in (None, self.dag_id) or run_id not in (None, self.run_id) or include_prior_dates:
            raise ValueNotPassed("xcom_pull reads values of this run's upstream tasks only (Tock passes values "
                                 "along dependencies, through the log): not other DAGs, runs or prior dates")

    def __repr__(self) -> str:
        return f"<TaskInstance {self.dag_id}.{self.task_id} {self.run_id} try {self.try_number}>"


def build_context(task: Task, run_id: str, try_number: int, queued: TaskQueued | None,
                  extras: Mapping[str, Any] | None = None) -> Context:
    """The context of a try of ``task`` from its TaskQueued (None: a try queued before the log recorded
    contexts, or run outside the scheduler with nothing recorded): dates None, params the DAG's."""
    dag: DAG = task.dag
    map_index = queued.map_index if queued else -1
    ti = RuntimeTaskInstance(task, run_id, try_number, queued.inputs if queued else (), map_index)
    logical_date = _moment(queued.logical_date if queued else None)
    run = DagRunInfo(dag.dag_id, run_id, queued.run_type if queued else "", logical_date,
                     _moment(queued.data_interval_start if queued else None),
                     _moment(queued.data_interval_end if queued else None),
                     _json_object(queued.conf_json) if queued else {})
    context = Context(dag=dag, task=task, ti=ti, task_instance=ti, run_id=run_id, dag_run=run,
                      logical_date=logical_date, data_interval_start=run.data_interval_start,
                      data_interval_end=run.data_interval_end,
                      params=_json_object(queued.params_json) if queued else _unrecorded_params(task),
                      prev_data_interval_start_success=_moment(queued.prev_data_interval_start_success)
                      if queued else None,
                      prev_data_interval_end_success=_moment(queued.prev_data_interval_end_success)
                      if queued else None,
                      map_index=map_index, test_mode=False, templates_dict=None)
    context.update(_date_keys(logical_date, dag.dag_id, task.task_id))
    context.update(_asset_keys(task, queued))
    context["kafka_output"] = _kafka_output()
    context.update(extras or {})
    return context


def _kafka_output() -> Any:
    from tock.kafka_output import KafkaOutput

    return KafkaOutput()  # the records written with the try's success (tock/kafka_output.py)


def _asset_keys(task: Task, queued: TaskQueued | None) -> dict[str, Any]:
    """Airflow's asset keys: the task's ``outlets`` and ``inlets``, the ``outlet_events`` it may add extra
    to, the ``triggering_asset_events`` of an asset-triggered run (tock/assets.py), and the latest events
    of its inlets (``inlet_events``, tock/inlet_events.py)."""
    from tock.assets import OutletEventAccessors, TriggeringAssetEvents, outlets_of
    from tock.inlet_events import InletEventsAccessors

    assets, aliases = outlets_of(task.options.outlets, task.task_id)
    given = task.options.inlets
    inlets = list(given) if isinstance(given, list | tuple) else [] if given is None else [given]
    return {"outlets": [*assets, *aliases], "inlets": inlets,
            "outlet_events": OutletEventAccessors(assets, aliases),
            "inlet_events": InletEventsAccessors(inlets, queued.inlet_events_json if queued else ""),
            "triggering_asset_events": TriggeringAssetEvents(queued.triggering_asset_events_json if queued else "")}


def _unrecorded_params(task: Task) -> dict[str, Any]:
    """With no TaskQueued: the DAG's params' defaults, the task's over them (a param with none is None)."""
    from schemas import params as rules
    from tock.params import params_of, to_params_json

    own = to_params_json(params_of(task.options.params, "params"))
    return rules.for_task(task.dag.params_json, own, "{}")


def _date_keys(logical_date: datetime | None, dag_id: str, task_id: str) -> dict[str, Any]:
    if logical_date is None:
        return dict.fromkeys(("ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz"), None) | {
            "task_instance_key_str": f"{dag_id}__{task_id}__"}
    ds, ts = logical_date.strftime("%Y-%m-%d"), logical_date.isoformat()
    return {"ds": ds, "ds_nodash": ds.replace("-", ""), "ts": ts,
            "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
            "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
            "task_instance_key_str": f"{dag_id}__{task_id}__{ds.replace('-', '')}"}


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _json_object(text: str) -> dict[str, Any]:
    import json

    found = json.loads(text or "{}")
    return found if isinstance(found, dict) else {}


def context_arguments(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                      context: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments a ``@task`` function gets from the context: each parameter it names that
    is a context key and not given by the call, and every key through ``**kwargs`` (Airflow's rule)."""
    try:
        signature = inspect.signature(function)
        bound = signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return {}
    parameters = signature.parameters.values()
    named = {parameter.name for parameter in parameters
             if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)}
    if any(parameter.kind == parameter.VAR_KEYWORD for parameter in parameters):
        return {key: value for key, value in context.items() if key not in bound and key not in kwargs}
    return {key: context[key] for key in named if key in context and key not in bound}


def resolve_references(value: Any, ti: RuntimeTaskInstance, walking: frozenset[int] = frozenset()) -> Any:
    """``value`` (a task's argument) with every reference to an upstream task's value replaced by that
    value, as the try's inputs hold it (containers rebuilt, everything else as is; a container that
    holds itself is passed as it is)."""
    from tock.tasks import Task, XComArg, ZipXComArg

    if isinstance(value, Task | XComArg):
        operator, key = (value, RETURN_VALUE) if isinstance(value, Task) else (value.operator, value.key)
        if _same_mapped_group(ti.task, operator):  # instance N reads instance N of it
            return ti.mapped_values(operator.task_id, key, map_indexes=ti.map_index)
        found = _referenced(ti, operator.task_id, key)
        transforms = value.transforms if isinstance(value, XComArg) else ()
        return _each_mapped(found, transforms) if transforms else found
    if isinstance(value, ZipXComArg):  # an argument, not mapped over: the list of the tuples
        return value.zipped([_referenced(ti, arg.operator.task_id, arg.key) for arg in value.args])
    if not isinstance(value, list | tuple | set | frozenset | dict) or id(value) in walking:
        return value
    inner = walking | {id(value)}
    if isinstance(value, dict):
        return {key: resolve_references(item, ti, inner) for key, item in value.items()}
    return type(value)(resolve_references(item, ti, inner) for item in value)


def _each_mapped(found: Any, transforms: tuple[Any, ...]) -> Any:
    """A ``.map(fn)``ped value passed as a plain argument: the list of its elements through ``fn``
    (Airflow's; a dict's elements are its (key, value) pairs, as when mapping over it)."""
    from tock.tasks import through

    items = list(found.items()) if isinstance(found, dict) else found
    if not isinstance(items, list | tuple):
        raise TypeError(f"a .map()ped value must be a list or dict, got a {type(found).__name__}")
    return [through(transforms, item) for item in items]


def _same_mapped_group(task: Task, upstream: Task) -> bool:
    """Whether both are tasks of the same mapped task group."""
    group = task.mapped.group if task.mapped is not None else ""
    return bool(group) and upstream.mapped is not None and upstream.mapped.group == group


def _referenced(ti: RuntimeTaskInstance, task_id: str, key: str) -> Any:
    if ti.is_mapped_input(task_id):
        return ti.mapped_values(task_id, key)  # a mapped upstream's value: its instances', in map index order
    if ti.input_try(task_id) is None:
        if key == RETURN_VALUE:
            return None  # it returned None (nothing passed), or ended without running (skipped)
        raise ValueNotPassed(f"task {task_id!r} passed no value under key {key!r} to {ti.task_id!r}")
    values = ti.values_of(task_id)
    if key not in values and key != RETURN_VALUE:
        raise ValueNotPassed(f"task {task_id!r} (try {ti.input_try(task_id)}) passed no value under key {key!r} "
                             f"to {ti.task_id!r}; it passed {sorted(values) or 'none'} (a returned dict is passed "
                             "key by key with multiple_outputs=True)")
    return values.get(key)
