"""Dynamic task mapping, as Airflow's: a ``@task`` function's ``.partial(**kwargs)``, ``.expand(**mapped)``
and ``.expand_kwargs(value)``, and an operator's ``Operator.partial(task_id=..., ...).expand(...)``.

A mapped task is one task of the DAG with several instances in a run, one per element of what it maps
over (a literal list or dict, or the value an upstream task passes on: an ``XComArg`` or a ``@task``
call's result). ``expand`` over several arguments makes the cartesian product of them, in the order
given, the last varying fastest (Airflow's); ``expand_kwargs`` one instance per dict of its list, each
the keyword arguments of that instance. A dict is mapped over as its (key, value) pairs. The scheduler
decides the number of instances once, in the log (TaskMapExpanded), and each instance's element
(TaskQueued.map_element_json, services/scheduler/core/mapping.py); its runner applies it to a copy
of the task (``with_element``). Mistakes are refused when the DAG file is parsed,
naming the task and the argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.dags import MAX_MAP_LENGTH, MapDefinition, MapInput
from tock.values import ValueNotSerializable, decode_values, encode_value

if TYPE_CHECKING:
    from tock.decorators import TaskFunction
    from tock.tasks import Task

EXPAND, EXPAND_KWARGS = "expand", "expand_kwargs"
KWARGS_INPUT = ""  # the name of expand_kwargs' one input


class MappingError(ValueError):
    """A mapping the DAG file asks for cannot be made; the message names the task and the argument."""


@dataclass(frozen=True, eq=False)
class MapSpec:
    """What a mapped task maps over: argument name -> a literal list or dict, or an upstream value
    (``XComArg``); expand_kwargs has one input, named "". ``fields``: for an operator, which attribute
    of the task each mappable argument sets (None: a ``@task`` function's keyword arguments)."""

    kind: str
    inputs: dict[str, Any]
    fields: Mapping[str, str] | None = None
    # In a mapped task group (tock/mapped_groups.py): the group's id, and which of the task's keyword
    # arguments each of the group's inputs fills (an input it does not take is left out of its element).
    group: str = ""
    arguments: Mapping[str, str] | None = None


def definition_of(spec: MapSpec, max_map_length: int | None) -> MapDefinition:
    """How the task expands, as its TaskDefinition records it."""
    return MapDefinition(kind=spec.kind, inputs=[_input_definition(name, value) for name, value in spec.inputs.items()],
                         max_map_length=MAX_MAP_LENGTH if max_map_length is None else max_map_length,
                         group=spec.group)


def _input_definition(name: str, value: Any) -> MapInput:
    from tock.params import NOTSET
    from tock.tasks import XComArg, ZipXComArg

    if isinstance(value, XComArg):
        return MapInput(name=name, task_id=value.operator.task_id, key=value.key)
    if isinstance(value, ZipXComArg):
        fill = "" if value.fillvalue is NOTSET else encode_value(value.fillvalue, f"zip() fillvalue of {name!r}")
        return MapInput(name=name, zip_task_ids=[arg.operator.task_id for arg in value.args],
                        zip_keys=[arg.key for arg in value.args], zip_fill_json=fill)
    return MapInput(name=name, literal_json=encode_value(value, f"expand() argument {name!r}"))


def max_map_length_problems(value: Any) -> list[str]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return []
    return [f"max_map_length must be a positive integer, got {value!r}"]


# -- @task functions -----------------------------------------------------------------------------

class PartialTaskFunction:
    """A ``@task`` function with some arguments fixed (``.partial(**kwargs)``), waiting for ``.expand()``
    or ``.expand_kwargs()`` to say what the rest map over."""

    def __init__(self, function: TaskFunction, kwargs: dict[str, Any]) -> None:
        self.function, self.kwargs = function, kwargs
        for name in kwargs:
            _check_function_argument(function, name, "partial()")

    def expand(self, **mapped: Any) -> Task:
        """A mapped task: one instance per element (the cartesian product over several arguments)."""
        label = self.function.task_id
        inputs = expand_inputs(label, mapped, self.kwargs)
        for name in inputs:
            _check_function_argument(self.function, name, "expand()")
        return _mapped(self.function(**self.kwargs), MapSpec(EXPAND, inputs))

    def expand_kwargs(self, value: Any) -> Task:
        """A mapped task: one instance per dict of ``value`` (a list of dicts or an upstream value), each
        the keyword arguments of that instance."""
        label = self.function.task_id
        checked = _kwargs_input(label, value, self.kwargs,
                                lambda name: _check_function_argument(self.function, name, "expand_kwargs()"))
        return _mapped(self.function(**self.kwargs), MapSpec(EXPAND_KWARGS, {KWARGS_INPUT: checked}))


def _check_function_argument(function: TaskFunction, name: str, where: str) -> None:
    parameters = inspect.signature(function.function).parameters
    if any(item.kind is inspect.Parameter.VAR_KEYWORD for item in parameters.values()):
        return
    found = parameters.get(name)
    if found is None or found.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise MappingError(f"task {function.task_id!r}: {where} got an unexpected keyword argument {name!r} "
                           f"(the function takes {', '.join(parameters) or 'none'})")


# -- operators ----------------------------------------------------------------------------------

class OperatorPartial:
    """``Operator.partial(task_id=..., ...)``: an operator with its fixed arguments, waiting for
    ``.expand()`` or ``.expand_kwargs()``."""

    def __init__(self, operator: type[Task], kwargs: dict[str, Any]) -> None:
        if "task_id" not in kwargs:
            raise MappingError(f"{operator.__name__}.partial() needs task_id=")
        self.operator, self.kwargs = operator, kwargs
        self.label = str(kwargs["task_id"])

    def expand(self, **mapped: Any) -> Task:
        inputs = expand_inputs(self.label, mapped, self.kwargs)
        for name in inputs:
            self._check_mappable(name, "expand()")
        missing = [name for name in self._placeholders() if name not in inputs]
        if missing:
            raise MappingError(f"task {self.label!r}: {self.operator.__name__} needs {', '.join(missing)} in "
                               "partial() or expand()")
        return _mapped(self._built(), MapSpec(EXPAND, inputs, self.operator.mappable_arguments))

    def expand_kwargs(self, value: Any) -> Task:
        checked = _kwargs_input(self.label, value, self.kwargs, lambda name: self._check_mappable(name,
                                                                                                  "expand_kwargs()"))
        for index, item in enumerate(checked if isinstance(checked, list) else ()):
            missing = [name for name in self._placeholders() if name not in item]
            if missing:
                raise MappingError(f"task {self.label!r}: expand_kwargs() item {index} gives no {', '.join(missing)} "
                                   "(nor does partial())")
        return _mapped(self._built(), MapSpec(EXPAND_KWARGS, {KWARGS_INPUT: checked},
                                              self.operator.mappable_arguments))

    def _placeholders(self) -> dict[str, Any]:
        """The required arguments partial() did not give: each instance's element must."""
        return {name: value for name, value in self.operator.mapped_placeholders.items() if name not in self.kwargs}

    def _built(self) -> Task:
        return self.operator(**self._placeholders(), **self.kwargs)

    def _check_mappable(self, name: str, where: str) -> None:
        mappable = self.operator.mappable_arguments
        if name not in mappable:
            raise MappingError(f"task {self.label!r}: {where} cannot map {self.operator.__name__}'s argument "
                               f"{name!r} (mappable: {', '.join(mappable) or 'none'})")


# -- shared checks ------------------------------------------------------------------------------

def expand_inputs(label: str, mapped: dict[str, Any], partial: dict[str, Any]) -> dict[str, Any]:
    if not mapped:
        raise MappingError(f"task {label!r}: expand() needs at least one argument to map over")
    inputs: dict[str, Any] = {}
    for name, value in mapped.items():
        if name in partial:
            raise MappingError(f"task {label!r}: argument {name!r} is given to both partial() and expand()")
        inputs[name] = _mappable(label, name, value, "expand()")
    return inputs


def _mappable(label: str, name: str, value: Any, where: str) -> Any:
    """The value as a mapping input: an upstream value (a task stands for its return value) or a
    literal list or dict that holds no upstream value and can travel in the log."""
    from tock.tasks import Task, XComArg, ZipXComArg, value_references

    if isinstance(value, Task):
        return XComArg(value)
    if isinstance(value, XComArg | ZipXComArg):
        return value
    if not isinstance(value, list | dict):
        raise MappingError(f"task {label!r}: {where} argument {name!r} must be a list, a dict or an upstream "
                           f"task's value, got a {type(value).__name__}")
    if value_references(value):
        raise MappingError(f"task {label!r}: {where} argument {name!r} holds upstream values inside a literal; "
                           "map over the upstream task's value itself")
    try:
        encode_value(value, f"{where} argument {name!r}")
    except ValueNotSerializable as error:
        raise MappingError(f"task {label!r}: {error}") from None
    return value


def _kwargs_input(label: str, value: Any, partial: dict[str, Any], check_name: Callable[[str], None]) -> Any:
    checked = _mappable(label, "kwargs", value, "expand_kwargs()")
    if isinstance(checked, dict):
        raise MappingError(f"task {label!r}: expand_kwargs() maps over a list of dicts, not a dict")
    for index, item in enumerate(checked if isinstance(checked, list) else ()):
        if not isinstance(item, dict) or not all(isinstance(key, str) for key in item):
            raise MappingError(f"task {label!r}: expand_kwargs() item {index} must be a dict of arguments, "
                               f"got a {type(item).__name__}")
        for name in item:
            if name in partial:
                raise MappingError(f"task {label!r}: argument {name!r} is given to both partial() and "
                                   f"expand_kwargs() (item {index})")
            check_name(name)
    return checked


def _mapped(created: Task, spec: MapSpec) -> Task:
    """The task, now mapped: it depends on the tasks whose values it maps over."""
    from tock.tasks import value_references

    created.mapped = spec
    created.set_upstream([task for value in spec.inputs.values() if not isinstance(value, list | dict)
                          for task in value_references(value)])
    return created


# -- at run time --------------------------------------------------------------------------------

def with_element(task: Task, element_json: str) -> Task:
    """The task as instance N of it runs: a copy with its element (TaskQueued.map_element_json) applied."""
    import copy

    assert task.mapped is not None  # only a mapped task has an element
    inputs, element = task.mapped.inputs, decode_values(element_json)
    if task.mapped.kind == EXPAND_KWARGS:
        item = _transformed(inputs[KWARGS_INPUT], element.get(KWARGS_INPUT, element))
        if not isinstance(item, dict):
            raise TypeError(f"task {task.task_id!r}: expand_kwargs() element is a {type(item).__name__}, "
                            "not a dict of arguments")
        element = item
    else:
        element = {name: _transformed(inputs[name], value) for name, value in element.items()}
    arguments = task.mapped.arguments
    if arguments is not None:  # a mapped group's input, as the keyword argument of the task it fills
        element = {arguments[name]: value for name, value in element.items() if name in arguments}
    instance = copy.copy(task)
    apply_element(instance, element)
    fields = task.mapped.fields or {}
    left = [name for name, placeholder in type(task).mapped_placeholders.items()
            if getattr(instance, fields.get(name, name)) == placeholder]
    if left:
        raise TypeError(f"task {task.task_id!r}: this instance's element gives no {', '.join(left)}")
    return instance


def _transformed(source: Any, value: Any) -> Any:
    """``value`` through the ``.map()`` functions of the input it came from (none for a literal); a zip's
    element is its tuple, each part through its own value's functions, then the zip's."""
    from tock.tasks import XComArg, ZipXComArg, through

    if isinstance(source, ZipXComArg):
        return source.element(tuple(value))
    return through(source.transforms, value) if isinstance(source, XComArg) else value


def apply_element(task: Task, element: dict[str, Any]) -> None:
    """Give the try's task its element: a ``@task`` function's keyword arguments, or the operator's fields."""
    assert task.mapped is not None  # only a mapped task has an element
    fields = task.mapped.fields
    if fields is None:
        task.kwargs = {**task.kwargs, **element}
        return
    for name, value in element.items():
        setattr(task, fields[name], tuple(value) if fields[name] == "args" else value)

