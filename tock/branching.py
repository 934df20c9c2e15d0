"""What a choosing task's return value decides: the direct downstream tasks it follows.

The runner calls ``followed(task, returned)`` after the callable of a branch (``@task.branch``,
``BranchPythonOperator``, ``LatestOnlyOperator``) or a short circuit returned, and records the answer
with the try's success; the scheduler skips the direct downstream tasks not followed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tock.setup_teardown import relatives
from tock.tasks import Task


def followed(task: Task, returned: Any) -> list[str] | None:
    """The sorted ids of ``task``'s direct downstream tasks that ``returned`` follows; None when it
    makes no choice (a task that does not choose, or a short circuit whose value is truthy: everything
    downstream runs by its trigger rule). A falsy short circuit follows nothing (``[]``).

    A branch returns None, a task id or a task group id (its roots), or an iterable of them, as
    Airflow's; any task id of the DAG is valid. A direct downstream task is followed when it was
    chosen or is downstream of a chosen task (Airflow's join rule: ``branch >> [a, join]``,
    ``a >> join`` and the branch chose ``a``: ``join`` is followed too). Raises ValueError naming the
    task and the value for anything else."""
    if task.chooses == "short_circuit":
        return None if returned else []
    if task.chooses != "branch":
        return None
    chosen = chosen_task_ids(task, returned)
    reached = chosen | relatives(task.dag, chosen, upstream=False)
    return sorted(task.downstream_task_ids & reached)


def chosen_task_ids(task: Task, returned: Any) -> set[str]:
    """The task ids a branch's return value names (a group id stands for the group's roots)."""
    dag = task.dag
    chosen: set[str] = set()
    for item in _returned_ids(task, returned):
        if item in dag.task_groups:
            chosen.update(root.task_id for root in dag.task_groups[item].roots)
        elif item in dag.tasks:
            chosen.add(item)
        else:
            downstream = ", ".join(sorted(task.downstream_task_ids)) or "none"
            raise ValueError(f"branch task {task.task_id!r} of DAG {dag.dag_id!r} returned {item!r}, which is "
                             f"neither a task id nor a task group id of the DAG (its downstream tasks: {downstream})")
    return chosen


def _returned_ids(task: Task, returned: Any) -> list[str]:
    if returned is None:
        return []
    if isinstance(returned, str):
        return [returned]
    if not isinstance(returned, Iterable):
        raise ValueError(f"branch task {task.task_id!r} returned {returned!r} (a {type(returned).__name__}): a "
                         "branch returns None, a task id or a task group id, or an iterable of them")
    items = list(returned)
    wrong = [item for item in items if not isinstance(item, str)]
    if wrong:
        raise ValueError(f"branch task {task.task_id!r} returned {items!r}: every item must be a task id or a "
                         f"task group id (a string), not {', '.join(repr(item) for item in wrong)}")
    return items
