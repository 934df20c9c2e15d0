"""Mapped task groups, as Airflow's: ``@task_group`` functions have ``.partial(**kwargs)`` and
``.expand(**mapped)``.

``my_group.expand(x=[1, 2, 3])`` makes the group once, calling the function with ``x`` standing for
"the element of this instance" (a ``MappedArgument``). Every task created in the group is then a mapped
task over the group's inputs (so they all have the same instances), its element filling the keyword
arguments it was given a ``MappedArgument`` for. The scheduler (services/scheduler/core/decide.py) runs
instance N of a task after instance N of its upstreams in the group, and gives it their N's values;
what follows the group reads each task's values as a list, in map index order.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from tock.mapping import EXPAND, MappingError, MapSpec, expand_inputs

if TYPE_CHECKING:
    from tock.task_group import TaskGroup, TaskGroupFunction
    from tock.tasks import Task


class MappedArgument:
    """A mapped task group's argument inside its function: a task given it (as a keyword argument)
    gets each instance's element there."""

    def __init__(self, group_id: str, name: str) -> None:
        self.group_id, self.name = group_id, name

    def __repr__(self) -> str:
        return f"<MappedArgument {self.group_id}.{self.name}>"


class PartialTaskGroupFunction:
    """A ``@task_group`` function with some arguments fixed, waiting for ``.expand()``."""

    def __init__(self, function: TaskGroupFunction, kwargs: dict[str, Any]) -> None:
        self.function, self.kwargs = function, kwargs

    def expand(self, **mapped: Any) -> Any:
        """The group, mapped: one instance of each of its tasks per element (the cartesian product over
        several arguments, as a task's ``expand``). Returns what the function returns, or the group."""
        return expand_group(self.function, self.kwargs, mapped)


def expand_group(function: TaskGroupFunction, partial: dict[str, Any], mapped: dict[str, Any]) -> Any:
    from tock.task_group import TaskGroup

    label = str(function.group_options["group_id"])
    inputs = expand_inputs(label, mapped, partial)
    try:
        inspect.signature(function.function).bind(**partial, **inputs)
    except TypeError as error:
        raise MappingError(f"task group {label!r}: {error}") from None
    with TaskGroup(**{"add_suffix_on_collision": True, **function.group_options}) as group:
        if function.function.__doc__ and not group.tooltip:
            group.tooltip = inspect.cleandoc(function.function.__doc__)
        returned = function.function(**partial, **{name: MappedArgument(group.group_id, name) for name in inputs})
    for task in group.tasks:
        _map_with_group(task, group, inputs)
    return group if returned is None else returned


def _map_with_group(task: Task, group: TaskGroup, inputs: dict[str, Any]) -> None:
    from tock.tasks import value_references

    where = f"task {task.task_id!r} in mapped task group {group.group_id!r}"
    if task.mapped is not None:
        raise MappingError(f"{where} is mapped itself: a mapped task inside a mapped task group is not supported")
    if any(_holds_argument(value) for value in task.args):
        raise MappingError(f"{where}: pass the group's arguments by keyword")
    arguments: dict[str, str] = {}
    for key, value in list(task.kwargs.items()):
        if isinstance(value, MappedArgument):
            arguments[value.name] = key
            del task.kwargs[key]  # each instance's element gives it
        elif _holds_argument(value):
            raise MappingError(f"{where}: argument {key!r} holds the group's argument inside a value; pass it "
                               "as the argument itself")
    task.mapped = MapSpec(EXPAND, inputs, group=group.group_id, arguments=arguments)
    task.set_upstream([source for value in inputs.values() for source in value_references(value)])


def _holds_argument(value: Any) -> bool:
    if isinstance(value, MappedArgument):
        return True
    if isinstance(value, dict):
        return any(_holds_argument(item) for item in value.values())
    return isinstance(value, list | tuple | set | frozenset) and any(_holds_argument(item) for item in value)
