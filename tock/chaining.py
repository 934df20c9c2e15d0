"""``chain`` and ``cross_downstream``: many dependencies in one call, Airflow's rules and errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tock.tasks import Task, XComArg


def _is_node(item: Any) -> bool:
    from tock.task_group import TaskGroup

    return isinstance(item, Task | XComArg | TaskGroup)


def chain(*tasks: Any) -> None:
    """Link each argument to the next: ``chain(a, [b, c], d)`` is ``a >> [b, c] >> d``; two lists next
    to each other are linked pairwise (``chain([a, b], [c, d])``: ``a >> c``, ``b >> d``) and must have
    the same length. Arguments are tasks, their values, task groups, or lists of them."""
    for up, down in zip(tasks, tasks[1:], strict=False):
        if _is_node(up):
            up.set_downstream(down)
        elif _is_node(down):
            down.set_upstream(up)
        elif not isinstance(up, Sequence) or not isinstance(down, Sequence) or isinstance(up, str) \
                or isinstance(down, str):
            raise TypeError(f"Chain not supported between instances of {type(up).__name__} and "
                            f"{type(down).__name__}")
        elif len(up) != len(down):
            raise ValueError(f"Chain not supported for different length Iterable. Got {len(up)} and {len(down)}.")
        else:
            for up_item, down_item in zip(up, down, strict=True):
                _node(up_item).set_downstream(down_item)


def cross_downstream(from_tasks: Sequence[Any], to_tasks: Any) -> None:
    """Make every one of ``to_tasks`` downstream of every one of ``from_tasks``."""
    if isinstance(from_tasks, str) or not isinstance(from_tasks, Sequence):
        raise TypeError(f"cross_downstream: from_tasks must be a list of tasks, got {from_tasks!r}")
    for item in from_tasks:
        _node(item).set_downstream(to_tasks)


def _node(item: Any) -> Any:
    if not _is_node(item):
        raise TypeError(f"dependencies link tasks, their values and task groups, not {item!r}")
    return item
