"""Priorities: each task's, from the weights as its weight rule adds them up (Airflow's rules), and
the order tries go in when more are ready than may be queued (limits.py) or launched (the shell's
launcher, bounded by each executor's parallelism).

Airflow's rules: ``absolute`` is the task's own ``priority_weight``; ``downstream`` (the default)
adds the weights of every task downstream of it, transitively (each counted once); ``upstream``
those of every task upstream of it. The sum is bounded to the 32-bit range Airflow stores it in.
Computed once per DAG definition (``DagEntry.of``), with the sets of tasks below and above each
task kept as bit masks, so a diamond counts a task once.

The order: higher priority first, then the run's logical date (older runs first), then the task id
and the run id, so that any two schedulers (a replay, a takeover) order the same tries the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from schemas import TaskDefinition
from services.scheduler.core.model import SchedulerState, TryKey

LOWEST, HIGHEST = -(2**31), 2**31 - 1  # Airflow's bounds on a priority (a 32-bit column)
DEFAULT_PRIORITY = 1  # of a try whose task is no longer in its DAG: Airflow's default weight

TryOrder = tuple[int, float, str, str, str]  # (-priority, logical date, task id, run id, dag id)


def priorities_of(tasks: Mapping[str, TaskDefinition], order: tuple[str, ...]) -> dict[str, int]:
    """Task id -> its priority, for the tasks of one DAG in topological ``order``."""
    rules = {task.weight_rule for task in tasks.values()}
    index = {task_id: number for number, task_id in enumerate(order)}
    below = _closure(order[::-1], _downstream_of(tasks), index) if "downstream" in rules else {}
    above = _closure(order, {task_id: tasks[task_id].upstream for task_id in order}, index) \
        if "upstream" in rules else {}
    by_weight = _masks_by_weight(tasks, index)
    found: dict[str, int] = {}
    for task_id in order:
        task = tasks[task_id]
        others = below if task.weight_rule == "downstream" else above if task.weight_rule == "upstream" else {}
        total = task.priority_weight + _sum_of(others.get(task_id, 0), by_weight)
        found[task_id] = min(max(total, LOWEST), HIGHEST)
    return found


def _downstream_of(tasks: Mapping[str, TaskDefinition]) -> dict[str, list[str]]:
    downstream: dict[str, list[str]] = {task_id: [] for task_id in tasks}
    for task_id, task in tasks.items():
        for up in task.upstream:
            if up in downstream:
                downstream[up].append(task_id)
    return downstream


def _closure(sequence: tuple[str, ...], linked: Mapping[str, list[str]], index: Mapping[str, int]) -> dict[str, int]:
    """Task id -> the bit mask of every task it reaches through ``linked``, transitively (bit i: the task
    ``index`` numbers i). In ``sequence`` each task comes after those it links to, so its mask is the
    union of theirs and their bits."""
    masks: dict[str, int] = {}
    for task_id in sequence:
        mask = 0
        for other in linked.get(task_id, ()):
            if other in masks:  # (a task of another DAG, or on a cycle the DAG processor refused: left out)
                mask |= masks[other] | (1 << index[other])
        masks[task_id] = mask
    return masks


def _masks_by_weight(tasks: Mapping[str, TaskDefinition], index: Mapping[str, int]) -> dict[int, int]:
    """Weight -> the bit mask of the tasks that have it (most DAGs have a few weights: often only 1)."""
    masks: dict[int, int] = {}
    for task_id, number in index.items():
        weight = tasks[task_id].priority_weight
        masks[weight] = masks.get(weight, 0) | (1 << number)
    return masks


def _sum_of(mask: int, by_weight: Mapping[int, int]) -> int:
    """The weights of the tasks in ``mask`` added up: per weight, how many have it."""
    return sum(weight * (mask & tasks).bit_count() for weight, tasks in by_weight.items()) if mask else 0


def priority_of(state: SchedulerState, key: TryKey) -> int:
    """The priority of the task of a try, as its DAG's latest definition says."""
    dag = state.dags.get(key[0])
    return dag.priorities.get(key[2], DEFAULT_PRIORITY) if dag is not None else DEFAULT_PRIORITY


def try_order(state: SchedulerState) -> Callable[[TryKey], TryOrder]:
    """The sort key of a try (``sorted(keys, key=try_order(state))``): the higher priority first, then
    the older run, then by ids."""
    def key_of(key: TryKey) -> TryOrder:
        run = state.runs.get(key[:2])
        logical_date = run.logical_date if run is not None else 0.0
        return -priority_of(state, key), logical_date, key[2], key[1], key[0]
    return key_of


def launch_order(states: Mapping[int, SchedulerState], free: int) -> list[tuple[int, TryKey]]:
    """(partition, try) of every queued try without a handle, in the order they are launched: the
    order they were queued while there are slots for all of them (``free``), else by ``try_order``
    across the partitions."""
    queued = [(partition, key) for partition, state in states.items() for key in state.unlaunched]
    if len(queued) <= free:
        return queued
    orders = {partition: try_order(state) for partition, state in states.items()}
    return sorted(queued, key=lambda item: orders[item[0]](item[1]))
