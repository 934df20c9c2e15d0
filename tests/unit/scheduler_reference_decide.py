"""The scheduler's decider as it was before issue 26, which the property test in test_scheduler_decide_walk.py
holds today's to, turn by turn: today's ``decide`` with its four shortcuts taken out. Every task is walked on
its own (no segments decided together), every try the walk would queue is built at once (no ``Candidate``
built only once admitted), every waiting task is judged on its own (no verdict shared by ``judged_alike``),
and the limits sort every TaskQueued (no DAG found full first, none taken per DAG)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from schemas import TaskQueued
from services.scheduler.core import decide_mapped
from services.scheduler.core.limits import Room, _key
from services.scheduler.core.priorities import try_order
from services.scheduler.core.trigger_rules import judge

decide_module = importlib.import_module("services.scheduler.core.decide")  # the package's `decide` is the function


def decide(state, now, policy, touched=None, evidence=None):
    with _as_before():
        return decide_module.decide(state, now, policy, touched, evidence)


class _Built:
    """Stands in for ``Candidate``: the TaskQueued, built at once."""

    def __new__(cls, queuing, instance, task, at):  # type: ignore[misc]
        return queuing.queued(instance, task, at)


def _judged(task_id, dag, run, view, mapped, _verdicts):
    return judge(task_id, dag, run, view, mapped)


def _admit(state, events: Sequence[Any]) -> list[Any]:
    """``events`` without the TaskQueued that do not fit their limits, taken in priority order (all sorted)."""
    wanted = [event for event in events if isinstance(event, TaskQueued)]
    if not wanted:
        return list(events)
    room = Room.of(state, {event.dag_id for event in wanted})
    order = try_order(state)
    held: set[int] = set()
    for event in sorted(wanted, key=lambda queued: order(_key(queued))):
        dag = state.dags.get(event.dag_id)
        if dag is None or room.fits(dag, _key(event)):
            room.take(_key(event))
        else:
            held.add(id(event))
    return [event for event in events if id(event) not in held] if held else list(events)


_BEFORE = {decide_module: {"Candidate": _Built, "judged_alike": _judged, "admit": _admit, "TOGETHER": False},
           decide_mapped: {"Candidate": _Built}}


@contextmanager
def _as_before() -> Iterator[None]:
    saved = {(module, name): getattr(module, name) for module, names in _BEFORE.items() for name in names}
    for module, replacements in _BEFORE.items():
        for name, replacement in replacements.items():
            setattr(module, name, replacement)
    try:
        yield
    finally:
        for (module, name), kept in saved.items():
            setattr(module, name, kept)
