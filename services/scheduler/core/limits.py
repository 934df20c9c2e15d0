"""Limits on tries queued or running at once: a DAG's ``max_active_tasks`` (across its runs), a task's
``max_active_tis_per_dag`` (across the DAG's runs) and ``max_active_tis_per_dagrun`` (within a run).

Counted from the fold (the queued tries without a handle and the live ones: ``state.unlaunched`` and
``state.live``), never by a counter a scheduler keeps, so a replay or a takeover counts the same.
Tock shards DAGs by partition: every run of a DAG is folded by its one owner, so the counts are exact.

A walk of the runs decides the TaskQueued of every task instance that may run; ``admit`` then keeps
them in priority order (priorities.py) while there is room and drops the rest: a task instance held
back stays as it was (no event), and is queued by a later turn, once tries of the DAG have ended.
Ending a try touches only its own run, so while a DAG has something held back the walk takes in
every open run of it (``walk_with_siblings``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

from schemas import TaskQueued
from services.scheduler.core.model import ACTIVE, DagEntry, RunKey, SchedulerState, TryKey
from services.scheduler.core.priorities import try_order
from services.scheduler.core.queuing import Candidate

Decided = TypeVar("Decided")


@dataclass(slots=True)
class Room:
    """Tries queued or running per DAG, per (DAG, task) and per (DAG, run, task): the fold's, plus
    those admitted this turn."""

    by_dag: Counter[str] = field(default_factory=Counter)
    by_task: Counter[tuple[str, str]] = field(default_factory=Counter)
    by_instance: Counter[TryKey] = field(default_factory=Counter)

    @staticmethod
    def of(state: SchedulerState, dag_ids: Collection[str]) -> Room:
        """The counts of the DAGs ``dag_ids`` as folded."""
        room = Room()
        for key in chain(state.unlaunched, state.live):
            if key[0] in dag_ids and (instance := state.instance(key)) is not None and instance.state in ACTIVE:
                room.take(key)
        return room

    def take(self, key: TryKey) -> None:
        self.by_dag[key[0]] += 1
        self.by_task[key[0], key[2]] += 1
        self.by_instance[key] += 1

    def fits(self, dag: DagEntry, key: TryKey) -> bool:
        """Whether one more try of ``key``'s task keeps every limit."""
        if self.by_dag[key[0]] >= dag.definition.max_active_tasks:
            return False
        task = dag.tasks.get(key[2])
        if task is None:
            return True
        per_dag, per_run = task.max_active_tis_per_dag, task.max_active_tis_per_dagrun
        return (per_dag is None or self.by_task[key[0], key[2]] < per_dag) \
            and (per_run is None or self.by_instance[key] < per_run)


def admit(state: SchedulerState, events: Sequence[Decided]) -> list[Decided]:
    """``events`` without the tries to queue (TaskQueued, or candidates not built yet) that do not fit
    their limits, taken in priority order."""
    wanted = [event for event in events if isinstance(event, TaskQueued | Candidate)]
    if not wanted:
        return list(events)
    room = Room.of(state, {event.dag_id for event in wanted})
    order = try_order(state)
    # A DAG already at its max_active_tasks admits none (its count only grows here): held without sorting.
    full = {dag_id for dag_id in room.by_dag if (dag := state.dags.get(dag_id)) is not None
            and room.by_dag[dag_id] >= dag.definition.max_active_tasks}
    held = {id(event) for event in wanted if event.dag_id in full}
    for event in sorted((item for item in wanted if item.dag_id not in full), key=lambda queued: order(_key(queued))):
        dag = state.dags.get(event.dag_id)
        if dag is None or room.fits(dag, _key(event)):
            room.take(_key(event))
        else:
            held.add(id(event))
    return [event for event in events if id(event) not in held] if held else list(events)


def walk_with_siblings(state: SchedulerState, keys: Iterable[RunKey]) -> set[RunKey]:
    """``keys`` and, for each DAG among them whose limits may hold something back, its other open runs:
    a try that ends in one run makes room for the others."""
    keys = set(keys)
    if not keys:
        return keys
    open_runs = Counter(dag_id for dag_id, _run in state.runs)
    dag_ids = {dag_id for dag_id, _run in keys if open_runs[dag_id] > 1 and _may_hold_back(state, dag_id,
                                                                                        open_runs[dag_id])}
    return keys | {key for key in state.runs if key[0] in dag_ids} if dag_ids else keys


def _may_hold_back(state: SchedulerState, dag_id: str, open_runs: int) -> bool:
    """False when no limit of the DAG can bind across its runs: no task has max_active_tis_per_dag, and
    the task instances of its open runs are not more than max_active_tasks. (While runs are open the
    count only falls as they finish, and the walk that ends a run's last try still counts that run.)"""
    dag = state.dags.get(dag_id)
    if dag is None:
        return False
    if any(task.max_active_tis_per_dag is not None for task in dag.definition.tasks):
        return True
    return len(dag.tasks) * open_runs > dag.definition.max_active_tasks


def _key(event: TaskQueued | Candidate) -> TryKey:
    return event.dag_id, event.run_id, event.task_id
