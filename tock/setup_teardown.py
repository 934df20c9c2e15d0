"""Setup and teardown tasks, as Airflow's: ``@setup``, ``@teardown``, ``Task.as_setup()``,
``Task.as_teardown(setups=...)``, ``with setup >> teardown:``, and the setups each task runs within.

A teardown runs when its setups ran, whatever happened in between (its trigger rule is
all_done_setup_success, not configurable); its failure fails the run only with
``on_failure_fail_dagrun=True``. A task between a setup and its teardown waits for the setup.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tock.decorators import TaskFunction, task
from tock.tasks import Task, XComArg, dependency_ends
from tock.trigger_rules import TriggerRule

if TYPE_CHECKING:
    from tock.dag import DAG

TEARDOWN_RULE = TriggerRule.ALL_DONE_SETUP_SUCCESS.value


def setup(func: Callable[..., Any]) -> TaskFunction:
    """``@setup`` (over a function, or over ``@task(...)``): its tasks are setups."""
    return _marked(func, "@setup", is_setup=True)


def teardown(_func: Callable[..., Any] | None = None, *,
             on_failure_fail_dagrun: bool = False) -> Any:
    """``@teardown`` or ``@teardown(on_failure_fail_dagrun=True)``: its tasks are teardowns."""
    if not isinstance(on_failure_fail_dagrun, bool):
        raise TypeError(f"on_failure_fail_dagrun must be True or False, got {on_failure_fail_dagrun!r}")

    def decorate(func: Callable[..., Any]) -> TaskFunction:
        return _marked(func, "@teardown", is_teardown=True, on_failure_fail_dagrun=on_failure_fail_dagrun)

    return decorate if _func is None else decorate(_func)


def _marked(func: Any, name: str, **role: bool) -> TaskFunction:
    from tock.task_group import TaskGroupFunction

    if isinstance(func, TaskGroupFunction):
        raise TypeError(f"{name}: Task groups cannot be marked as setup or teardown.")
    if isinstance(func, types.FunctionType):
        func = task(func)
    if not isinstance(func, TaskFunction):
        raise TypeError(f"{name} decorates a function or a @task function, not {func!r}")
    if func.role.is_setup and role.get("is_teardown") or func.role.is_teardown and role.get("is_setup"):
        raise TypeError(f"{name}: task {func.task_id!r} cannot be both a setup and a teardown")
    return func.with_role(**role)


def mark_setup(target: Task) -> Task:
    """``task.as_setup()``."""
    if target.is_teardown:
        target.dag.fail(f"task {target.task_id!r} is a teardown: it cannot also be a setup")
    target.is_setup = True
    return target


def mark_teardown(target: Task, setups: Task | XComArg | Iterable[Task | XComArg] | None,
                  on_failure_fail_dagrun: bool | None) -> Task:
    """``task.as_teardown(setups=..., on_failure_fail_dagrun=...)``: each setup is marked and linked
    ``setup >> task``; the task's trigger rule becomes all_done_setup_success."""
    if target.is_setup:
        target.dag.fail(f"task {target.task_id!r} is a setup: it cannot also be a teardown")
    if target.trigger_rule_given and target.trigger_rule != TEARDOWN_RULE:
        target.dag.fail(f"task {target.task_id!r} has trigger_rule {target.trigger_rule!r}: Trigger rule not "
                        f"configurable for teardown tasks. (a teardown's is {TEARDOWN_RULE})")
    if on_failure_fail_dagrun is not None and not isinstance(on_failure_fail_dagrun, bool):
        target.dag.fail(f"task {target.task_id!r}: on_failure_fail_dagrun must be True or False, "
                        f"got {on_failure_fail_dagrun!r}")
    target.is_teardown = True
    target.options = replace(target.options, trigger_rule=TEARDOWN_RULE)
    if on_failure_fail_dagrun is not None:
        target.on_failure_fail_dagrun = on_failure_fail_dagrun
    for one in ([] if setups is None else dependency_ends(setups, upstream=True)):
        mark_setup(one).set_downstream(target)
    return target


# -- `with setup >> teardown:` -------------------------------------------------------------------


@dataclass
class _Scope:
    task: Task
    setups: list[Task]
    teardowns: list[Task]
    before: set[str]  # the DAG's task ids when the block opened


_scopes: list[_Scope] = []


def enter_scope(context_task: Task) -> None:
    """Open a ``with`` block on a setup (with its teardowns) or a teardown (with its setups)."""
    if not (context_task.is_setup or context_task.is_teardown):
        context_task.dag.fail(f"task {context_task.task_id!r}: Only setup/teardown tasks can be used as "
                              "context managers.")
    tasks = context_task.dag.tasks
    if context_task.is_setup:
        setups = [context_task]
        teardowns = [tasks[item] for item in sorted(context_task.downstream_task_ids) if tasks[item].is_teardown]
    else:
        setups = [tasks[item] for item in sorted(context_task.upstream_task_ids) if tasks[item].is_setup]
        teardowns = [context_task]
    _scopes.append(_Scope(context_task, setups, teardowns, set(tasks)))


def exit_scope(context_task: Task, completed: bool) -> None:
    """Close the block: the tasks created in it run after its setups and before its teardowns."""
    scope = next(item for item in reversed(_scopes) if item.task is context_task)
    _scopes.remove(scope)
    if not completed:
        return
    ends = {item.task_id for item in [*scope.setups, *scope.teardowns]}
    work = [item for task_id, item in context_task.dag.tasks.items()
            if task_id not in scope.before and task_id not in ends]
    ids = {item.task_id for item in work}
    for root in (item for item in work if item.upstream_task_ids.isdisjoint(ids)):
        root.set_upstream(scope.setups)
    for leaf in (item for item in work if item.downstream_task_ids.isdisjoint(ids)):
        leaf.set_downstream(scope.teardowns)


# -- what the definition records ------------------------------------------------------------------


def indirect_setups(dag: DAG) -> dict[str, list[str]]:
    """Each task's *relevant* setups that are not its direct upstreams, the ones Airflow's trigger-rule
    dependency waits for besides the rule: the setups upstream of it that have no teardown, or whose
    teardown is downstream of it. A teardown has none."""
    found: dict[str, set[str]] = {task_id: set() for task_id in dag.tasks}
    for setup_task in (item for item in dag.tasks.values() if item.is_setup):
        for task_id in _within(dag, setup_task):
            found[task_id].add(setup_task.task_id)
    return {task_id: sorted(setups - dag.tasks[task_id].upstream_task_ids) for task_id, setups in found.items()}


def _within(dag: DAG, setup_task: Task) -> set[str]:
    """The non-teardown tasks ``setup_task`` is relevant to: downstream of it and, when it has
    teardowns, upstream of one of them."""
    teardowns = {item for item in setup_task.downstream_task_ids if dag.tasks[item].is_teardown}
    inside = relatives(dag, {setup_task.task_id}, upstream=False)
    if teardowns:
        inside &= relatives(dag, teardowns, upstream=True)
    return {item for item in inside if not dag.tasks[item].is_teardown}


def relatives(dag: DAG, start: set[str], *, upstream: bool) -> set[str]:
    """Every task strictly upstream (or downstream) of the tasks ``start``."""
    seen: set[str] = set()
    frontier = list(start)
    while frontier:
        current = dag.tasks[frontier.pop()]
        for item in current.upstream_task_ids if upstream else current.downstream_task_ids:
            if item not in seen:
                seen.add(item)
                frontier.append(item)
    return seen


def group_leaves(tasks: list[Task]) -> list[Task]:
    """A group's leaves, Airflow's rule: a task with no downstream task in the group, or, for such a
    task that is a teardown, the last non-teardown tasks before it in the group (not through the
    path from its own setup, and not a task that still has other work after it in the group)."""
    ids = {item.task_id for item in tasks}
    by_id = {item.task_id: item for item in tasks}
    found: list[Task] = []
    for item in tasks:
        if not item.downstream_task_ids.isdisjoint(ids):
            continue
        found.extend([item] if not item.is_teardown else _before_teardown(item, by_id))
    return list(dict.fromkeys(found))


def _before_teardown(teardown_task: Task, by_id: dict[str, Task]) -> list[Task]:
    found: list[Task] = []
    for upstream_id in sorted(teardown_task.upstream_task_ids):
        upstream = by_id.get(upstream_id)
        if upstream is None:
            continue
        if upstream.is_teardown:
            found.extend(_before_teardown(upstream, by_id))
        elif not (teardown_task.is_teardown and upstream.is_setup) and not _more_work_after(
                upstream, teardown_task.task_id, by_id):
            found.append(upstream)
    return found


def _more_work_after(item: Task, exclude: str, by_id: dict[str, Task]) -> bool:
    return any(down != exclude and down in by_id and not by_id[down].is_teardown
               for down in item.downstream_task_ids)
