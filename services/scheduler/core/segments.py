"""Segments: runs of plain tasks alike, next to each other in a DAG's topological order, that a walk of a
run decides together (decide.py ``_decide_segment``), computed once per definition (``DagEntry.of``).

A fan-out's leaves share their upstream list and trigger rule, and the order puts them side by side.
Walking them one by one cost a wide run most of its decision turn (4 µs a leaf at 10,000 wide, every
turn): each leaf not started yet was judged, made a candidate, given a priority key and sorted, for the
limits to admit a handful. Decided together, the leaves that have no instance yet share one verdict (the
one ``judged_alike`` shares), stand in the walk's view with one state, and go to the limits as one
``CandidateGroup`` that ``admit`` draws from in priority order only as far as there is room; the leaves
that have an instance and nothing to decide (queued, running, ended, no command pending) keep their
state. Anything else (a leaf to skip or give up, a command pending, a dead try, a failure to retry) is
decided one leaf at a time, exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeAlias

from schemas import TaskDefinition

# Kinds a walk decides without a try, or with a decision of their own (decide.py ``_queued``).
_SPECIAL_KINDS = frozenset({"empty", "time_sensor", "external_sensor"})


Member: TypeAlias = tuple[str, int]
"""A task instance decided together: (task id, map index; -1 for a task that is not mapped)."""

Walked: TypeAlias = tuple[str, str, Member]
"""An instance to decide together: (its key in the run, its name in the states the walk keeps, itself)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Tasks alike, in walk order (``walked``: as together.py takes them), and the order their tries go when
    there is not room for all (higher priority first, then by task id: priorities.try_order within one
    run): ``ranked``, with each task's place in the walk, unless that order is the walk's (None)."""

    walked: tuple[Walked, ...]
    ranked: tuple[Member, ...] | None
    place: dict[Member, int]  # (empty when ``ranked`` is None)

    @property
    def size(self) -> int:
        return len(self.walked)


def walk_segments(order: tuple[str, ...], tasks: Mapping[str, TaskDefinition], alike: Mapping[str, object],
                  priorities: Mapping[str, int]) -> dict[str, Segment]:
    """The first task of each segment of two or more -> the segment."""
    segments: dict[str, Segment] = {}
    start = 0
    while start < len(order):
        key = alike.get(order[start]) if plain(tasks[order[start]]) else None
        end = start + 1
        while key is not None and end < len(order) and alike.get(order[end]) == key and plain(tasks[order[end]]):
            end += 1
        if end - start >= 2:
            segments[order[start]] = _segment(order[start:end], priorities)
        start = end
    return segments


def _segment(members: tuple[str, ...], priorities: Mapping[str, int]) -> Segment:
    walked = tuple((task_id, task_id, (task_id, -1)) for task_id in members)
    ranked = sorted(members, key=lambda task_id: (-priorities[task_id], task_id))
    if ranked == list(members):  # a fan-out's leaves, of one weight: their ids, in order
        return Segment(walked, None, {})
    return Segment(walked, tuple((task_id, -1) for task_id in ranked),
                   {(task_id, -1): place for place, task_id in enumerate(members)})


def plain(task: TaskDefinition) -> bool:
    """A task whose instance not started yet is a try to queue once its rule lets it run: not mapped, and
    ``not_special``."""
    return task.mapped is None and not_special(task)


def not_special(task: TaskDefinition) -> bool:
    """Not empty, no sensor decided by the scheduler, no wait after its success: its instances not started
    yet are tries to queue once its rule lets them run, and once ended they decide nothing more."""
    return task.kind not in _SPECIAL_KINDS and task.external is None and task.time_wait is None


@lru_cache(maxsize=32)
def expanded(task_id: str, count: int) -> tuple[Walked, ...]:
    """The instances of a mapped task expanded to ``count``, as together.py takes them: keyed ``task|i`` in the
    run (model.instance_key), named ``task[i]`` in an upstream count (mapping.instance_states)."""
    return tuple((f"{task_id}|{index}", f"{task_id}[{index}]", (task_id, index)) for index in range(max(count, 0)))
