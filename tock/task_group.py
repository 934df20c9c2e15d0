"""Task groups: ``TaskGroup`` (a context manager) and ``@task_group``, as Airflow's.

A group prefixes the ids of what is created inside it (``group.task``; nested: ``outer.inner.task``)
unless ``prefix_group_id=False``, gives its tasks its ``default_args``, and is a dependency end:
``start >> group`` links its roots, ``group >> end`` its leaves (computed when ``>>`` is called).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tock.tasks import ID_PATTERN, Links, Task, default_args_problem, defaults_for_kind

if TYPE_CHECKING:
    from tock.dag import DAG
    from tock.mapped_groups import PartialTaskGroupFunction

# A group's own id: no dots (they separate the levels of a full id), as Airflow's group keys.
GROUP_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

_open: list[TaskGroup] = []  # groups whose `with` block is open, innermost last


def current_group(dag: DAG) -> TaskGroup | None:
    """The innermost open group of ``dag``, if any."""
    for group in reversed(_open):
        if group.dag is dag:
            return group
    return None


class TaskGroup(Links):
    """``with TaskGroup("load", tooltip=..., default_args={"retries": 2}) as load: ...``.

    ``default_args``: options (only task options: retries, trigger_rule, queue...) for the tasks made in
    the group that do not set them; a nested group's add to its parent's. ``ui_color``, ``ui_fgcolor``
    and ``group_display_name`` are accepted for Airflow's sake; Tock's UI does not use them."""

    def __init__(self, group_id: str, prefix_group_id: bool = True, parent_group: TaskGroup | None = None,
                 dag: DAG | None = None, default_args: dict[str, Any] | None = None, tooltip: str = "",
                 ui_color: str = "CornflowerBlue", ui_fgcolor: str = "#000", add_suffix_on_collision: bool = False,
                 group_display_name: str = "") -> None:
        self.dag = _owner(group_id, dag, parent_group)
        self.group_id: str = group_id
        self.default_args: dict[str, Any] = {}
        self.parent_group = parent_group if parent_group is not None else current_group(self.dag)
        if self.parent_group is not None and self.parent_group.dag is not self.dag:
            self.dag.fail(f"task group {group_id!r} cannot be in group {self.parent_group.group_id!r} of "
                          f"DAG {self.parent_group.dag.dag_id!r}")
        self._check_fields(group_id, prefix_group_id, tooltip)
        self.prefix_group_id, self.tooltip = prefix_group_id, tooltip
        self.ui_color, self.ui_fgcolor, self.group_display_name = ui_color, ui_fgcolor, group_display_name
        self.children: dict[str, Task | TaskGroup] = {}
        self.group_id = self._full_id(group_id, add_suffix_on_collision)
        self.default_args = {**(self.parent_group.default_args if self.parent_group else {}),
                             **self._checked_defaults(default_args)}
        self.dag.add_task_group(self)
        if self.parent_group is not None:
            self.parent_group.add(self)

    def _check_fields(self, group_id: Any, prefix_group_id: Any, tooltip: Any) -> None:
        if not isinstance(group_id, str) or not GROUP_KEY.match(group_id):
            self.dag.fail(f"task group id {group_id!r} must be letters, digits, '_' and '-' (no dots)")
        if not isinstance(prefix_group_id, bool):
            self.dag.fail(f"task group {group_id!r}: prefix_group_id must be True or False, got {prefix_group_id!r}")
        if not isinstance(tooltip, str):
            self.dag.fail(f"task group {group_id!r}: tooltip must be a string, got {tooltip!r}")

    def _full_id(self, group_id: str, add_suffix_on_collision: bool) -> str:
        """The group's id in the DAG (its parent's prefix, if the parent prefixes); a taken one gets
        ``__1``, ``__2``... with ``add_suffix_on_collision`` (``@task_group``), else is refused."""
        parent = self.parent_group
        full = parent.child_id(group_id) if parent is not None else group_id
        taken = set(self.dag.tasks) | set(self.dag.task_groups)
        number = 0
        while full in taken and add_suffix_on_collision:
            number += 1
            full = parent.child_id(f"{group_id}__{number}") if parent is not None else f"{group_id}__{number}"
        if full in taken:
            self.dag.fail(f"task group id {full!r} has already been added to the DAG")
        if not ID_PATTERN.match(full):
            self.dag.fail(f"task group id {full!r} must match {ID_PATTERN.pattern}")
        return full

    def _checked_defaults(self, default_args: Any) -> dict[str, Any]:
        if default_args is None:
            return {}
        problem = default_args_problem(default_args)
        if problem is not None:
            self.dag.fail(f"task group {self.group_id!r}: {problem}")
        return dict(default_args)

    def child_id(self, label: str) -> str:
        """The full id of ``label`` (a task or group created in this group)."""
        return f"{self.group_id}.{label}" if self.prefix_group_id else label

    def defaults_for(self, kind: str) -> dict[str, Any]:
        """The default_args a task of ``kind`` takes (Python-only options go to Python tasks only)."""
        return defaults_for_kind(self.default_args, kind)

    def add(self, child: Task | TaskGroup) -> None:
        key = child.task_id if isinstance(child, Task) else child.group_id
        self.children[key] = child

    @property
    def tasks(self) -> list[Task]:
        """Every task in the group, nested groups' too, in the order they were created."""
        found: list[Task] = []
        for child in self.children.values():
            found.extend([child] if isinstance(child, Task) else child.tasks)
        return found

    @property
    def roots(self) -> list[Task]:
        """Its tasks with no upstream task in the group (what ``x >> group`` links to)."""
        tasks = self.tasks
        ids = {item.task_id for item in tasks}
        return [item for item in tasks if item.upstream_task_ids.isdisjoint(ids)]

    @property
    def leaves(self) -> list[Task]:
        """Its tasks with no downstream task in the group (what ``group >> x`` links from); a teardown
        at the end stands for the work before it, as in Airflow: the leaf is the last task before the
        teardowns, so what follows the group waits for the work, not for its clean-up."""
        from tock.setup_teardown import group_leaves

        return group_leaves(self.tasks)

    def get_roots(self) -> list[Task]:
        return self.roots

    def get_leaves(self) -> list[Task]:
        return self.leaves

    def dependency_ends(self, *, upstream: bool) -> list[Task]:
        ends = self.leaves if upstream else self.roots
        if not ends:
            self.dag.fail(f"task group {self.group_id!r} has no tasks: it cannot be a dependency end "
                          "(create its tasks before linking it)")
        return ends

    def set_downstream(self, others: Any) -> None:
        for leaf in self.dependency_ends(upstream=True):
            leaf.set_downstream(others)

    def set_upstream(self, others: Any) -> None:
        for root in self.dependency_ends(upstream=False):
            root.set_upstream(others)

    def __enter__(self) -> TaskGroup:
        _open.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        _open.remove(self)

    def __repr__(self) -> str:
        return f"<TaskGroup {self.dag.dag_id}.{self.group_id} ({len(self.tasks)} tasks)>"


def _owner(group_id: Any, dag: DAG | None, parent_group: TaskGroup | None) -> DAG:
    from tock.dag import current_dag

    owner = dag or (parent_group.dag if parent_group is not None else None) or current_dag()
    if owner is None:
        raise RuntimeError(f"task group {group_id!r} must be created inside a `with DAG(...)` block or given dag=")
    return owner


_GROUP_PARAMETERS = inspect.signature(TaskGroup.__init__)


class TaskGroupFunction:
    """A ``@task_group`` function: called inside a DAG, it makes a group (id: the function's name, or
    ``group_id=``; a taken one gets ``__1``...; tooltip: its docstring) and creates, inside it, what the
    function creates. It returns what the function returns, or the group when that is None, as
    Airflow does, so ``start >> my_group() >> end`` links the group's ends (or the returned task).
    Outside a DAG it is the plain function."""

    def __init__(self, function: Callable[..., Any], group_options: dict[str, Any]) -> None:
        _GROUP_PARAMETERS.bind_partial(None, **group_options)  # an unknown option fails at the decorator
        self.function = function
        self.group_options = {"group_id": function.__name__, **group_options}
        self.__name__ = getattr(function, "__name__", "task_group")
        self.__doc__ = function.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tock.dag import current_dag

        if current_dag() is None:
            return self.function(*args, **kwargs)
        with TaskGroup(**{"add_suffix_on_collision": True, **self.group_options}) as group:
            if self.function.__doc__ and not group.tooltip:
                group.tooltip = inspect.cleandoc(self.function.__doc__)
            returned = self.function(*args, **kwargs)
        return group if returned is None else returned

    def override(self, **group_options: Any) -> TaskGroupFunction:
        return TaskGroupFunction(self.function, {**self.group_options, **group_options})

    def partial(self, **kwargs: Any) -> PartialTaskGroupFunction:
        """The group's fixed arguments, then ``.expand(...)`` (a mapped task group, Airflow's)."""
        from tock.mapped_groups import PartialTaskGroupFunction

        return PartialTaskGroupFunction(self, kwargs)

    def expand(self, **mapped: Any) -> Any:
        """A mapped task group: each of its tasks has one instance per element (tock/mapped_groups.py)."""
        return self.partial().expand(**mapped)


def task_group(python_callable: Callable[..., Any] | None = None,
               **group_options: Any) -> TaskGroupFunction | Callable[[Callable[..., Any]], TaskGroupFunction]:
    """``@task_group`` or ``@task_group(group_id=..., tooltip=..., default_args=..., prefix_group_id=...)``."""

    def decorate(function: Callable[..., Any]) -> TaskGroupFunction:
        if not callable(function) or isinstance(function, Task | TaskGroupFunction):
            raise TypeError(f"@task_group decorates a function, not {function!r}")
        return TaskGroupFunction(function, group_options)

    return decorate if python_callable is None else decorate(python_callable)
