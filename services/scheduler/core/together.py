"""Deciding many task instances of one walk together (issue 26): the tasks of a segment (segments.py), or
the instances of an expanded mapped task outside a mapped task group. What the walk decides for each is
exactly what deciding it on its own would (decide.py ``_decide_task``); the property test in
tests/unit/test_scheduler_decide_walk.py holds the two to the same decisions, turn by turn.

Each instance is one of three:

- *fresh*: nothing in the run yet. Their task's shared verdict (trigger_rules.judged_alike) decides them
  all: each a try to queue (one CandidateGroup for the limits to draw from, limits.admit) or waiting.
  A verdict that skips or gives them up writes an event each: they are then decided one by one.
- *quiet*: deciding it writes nothing and leaves its state (queued, running or ended; no command
  pending, no pod ended without its outcome, its try not found dead).
- anything else: decided on its own (``decide_one``); its events end the group so far, so the
  decisions come in the walk's order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeAlias, TypeVar

from services.scheduler.core.model import (
    NONE,
    QUEUED,
    REMOVED,
    RUNNING,
    SKIPPED,
    SUCCESS,
    UPSTREAM_FAILED,
    TaskInstance,
    TryKey,
)
from services.scheduler.core.queuing import CandidateGroup, Queuing
from services.scheduler.core.segments import Member, Segment, Walked
from services.scheduler.core.trigger_rules import GIVE_UP, RUN, SKIP, judged_alike

Decided = TypeVar("Decided")
DecideOne: TypeAlias = Callable[[TaskInstance], tuple[Sequence[Decided], str]]
"""Deciding one instance on its own: (its events, its state once they are folded)."""

QUIET = frozenset({QUEUED, RUNNING, SUCCESS, SKIPPED, UPSTREAM_FAILED, REMOVED})


def fresh_state(queuing: Queuing, task_id: str, view: Mapping[str, str], paused: bool) -> str:
    """What the walk makes of the task's fresh instances, if their shared verdict decides them all alike:
    QUEUED (each a try to queue), NONE (waiting); "" when each is decided on its own (no verdict shared,
    or one that skips or gives them up)."""
    dag = queuing.dag
    judged_alike(task_id, dag, queuing.run, view, queuing.mapped_states, queuing.verdicts)
    key = dag.alike.get(task_id)
    shared = queuing.verdicts.get(key) if key is not None else None
    if shared is None or shared.outcome in (SKIP, GIVE_UP):
        return ""
    return QUEUED if shared.outcome == RUN and not paused else NONE


def decide_together(queuing: Queuing, walked: Iterable[Walked], fresh: str, states: dict[str, str],
                    dead: Collection[TryKey], decide_one: DecideOne[Decided], *, segment: Segment | None = None,
                    queueable: Callable[[], bool] | None = None, at: float) -> list[Decided | CandidateGroup]:
    """The events of the instances ``walked`` (in walk order), each one's state set in ``states``. ``fresh``:
    from ``fresh_state``; ``segment``: theirs, if they are one (its priority order); ``queueable``: asked
    once, before the first fresh instance is made a try to queue (False: each is decided on its own, which
    says why it is not queued)."""
    run = queuing.run
    instances, dag_id, run_id = run.tasks, run.dag_id, run.run_id
    events: list[Decided | CandidateGroup] = []
    group: list[Member] = []
    for key, name, member in walked:
        instance = instances.get(key)
        if instance is None and fresh == QUEUED and queueable is not None:
            fresh, queueable = fresh if queueable() else "", None
        if instance is None and fresh:
            states[name] = fresh
            if fresh == QUEUED:
                group.append(member)
            continue
        if instance is not None and instance.state in QUIET and not instance.pending and not instance.pod_ended \
                and not (dead and (dag_id, run_id, key) in dead):  # quiet (inline: the hot path of a wide run)
            states[name] = instance.state
            continue
        decided, states[name] = decide_one(instance or TaskInstance(member[0], map_index=member[1]))
        if decided:
            if group:
                events.append(_group(queuing, group, segment, at))
                group = []
            events += decided
    if group:
        events.append(_group(queuing, group, segment, at))
    return events


def _group(queuing: Queuing, members: list[Member], segment: Segment | None, at: float) -> CandidateGroup:
    if segment is None:
        return CandidateGroup(queuing, members, None, {}, at)
    return CandidateGroup(queuing, members, segment.ranked, segment.place, at)

