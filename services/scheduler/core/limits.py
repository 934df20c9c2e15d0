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

import heapq
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeAlias, TypeVar

from schemas import TaskQueued
from services.scheduler.core.model import ACTIVE, DagEntry, RunKey, SchedulerState, TryKey
from services.scheduler.core.priorities import TryOrder, try_order
from services.scheduler.core.queuing import Candidate, CandidateGroup
from services.scheduler.core.segments import Member

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


def admit(state: SchedulerState, events: Sequence[Decided]) -> list[Decided | Candidate]:
    """``events`` without the tries to queue (TaskQueued, or candidates not built yet) that do not fit
    their limits, taken in priority order; each group of candidates replaced by those of it admitted, in
    its walk order. Every limit counts within one DAG, so each DAG's tries are taken on their own, and
    once a DAG is at its max_active_tasks the rest of its tries are held unseen (not even ordered)."""
    wanted = [event for event in events if isinstance(event, TaskQueued | Candidate | CandidateGroup)]
    if not wanted:
        return list(events)
    room = Room.of(state, {event.dag_id for event in wanted})
    order = try_order(state)
    by_dag: dict[str, list[TaskQueued | Candidate | CandidateGroup]] = {}
    for event in wanted:
        by_dag.setdefault(event.dag_id, []).append(event)
    admitted: set[int] = set()
    drawn: dict[int, list[Member]] = {}  # id of a group -> its members admitted, in priority order
    places = {id(event): place for place, event in enumerate(events)}
    for dag_id, queued in by_dag.items():
        dag = state.dags.get(dag_id)
        for item, member in _in_order(queued, order, places):
            if dag is not None and room.by_dag[dag_id] >= dag.definition.max_active_tasks:
                break  # full: nothing more of it fits
            key = (dag_id, item.run_id, member[0])  # (a mapped task's instances count as their task: Airflow's)
            if dag is None or room.fits(dag, key):
                room.take(key)
                if isinstance(item, CandidateGroup):
                    drawn.setdefault(id(item), []).append(member)
                else:
                    admitted.add(id(item))
    return [*_kept(events, admitted, drawn)]


Queueable: TypeAlias = TaskQueued | Candidate | CandidateGroup
_Drawn: TypeAlias = tuple[TryOrder, int, int, Queueable, Member]  # (order, place in the events, in its group, ...)


def _in_order(queued: list[Queueable], order: Callable[[TryKey], TryOrder],
              places: dict[int, int]) -> Iterator[tuple[Queueable, Member]]:
    """(what queues it, member) of each try of one DAG, in priority order, equal ones as they came in the
    walk: the single ones sorted, merged with each group drawn from in its own order."""
    singles = sorted((order(_key(item)), places[id(item)], 0, item, (item.task_id, -1)) for item in queued
                     if not isinstance(item, CandidateGroup))
    streams = [iter(singles)] + [_group_stream(group, order, places[id(group)]) for group in queued
                                 if isinstance(group, CandidateGroup)]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_merge_key)
    return ((item, member) for *_, item, member in merged)


def _merge_key(drawn: _Drawn) -> tuple[TryOrder, int, int]:
    return drawn[0], drawn[1], drawn[2]


def _group_stream(group: CandidateGroup, order: Callable[[TryKey], TryOrder], place: int) -> Iterator[_Drawn]:
    dag_id, run_id = group.dag_id, group.run_id
    return ((order((dag_id, run_id, member[0])), place, offset, group, member)
            for offset, member in enumerate(group.in_priority_order()))


def _kept(events: Sequence[Decided], admitted: set[int],
          drawn: dict[int, list[Member]]) -> Iterator[Decided | Candidate]:
    for event in events:
        if isinstance(event, CandidateGroup):
            yield from (event.candidate(member) for member in event.in_walk_order(drawn.get(id(event), [])))
        elif not isinstance(event, TaskQueued | Candidate) or id(event) in admitted:
            yield event


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
