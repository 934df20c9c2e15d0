"""A mapped task in the walk of a run (decide.py): as a whole until it is expanded, then its instances, each
as a task; its state in the walk is theirs together (mapping.whole_state), and its downstream count each.

A task of a mapped task group is judged by its upstreams in the group as their instance of its own map
index (named ``up[N]``); as a whole (not expanded yet), an upstream in the group that has expanded with
instances counts as done, so it expands too. Outside a mapped group: the walk's states as they are, and its
instances are decided together (together.py).

Deciding one instance is the walk's (``DecideTask``): this module only says which, and with which view.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeAlias, TypeVar

from schemas import (
    TaskCleared,
    TaskDefinition,
    TaskKillRequested,
    TaskMapExpanded,
    TaskMapFailed,
    TaskRemoved,
    TaskSkipped,
)
from services.scheduler.core.mapping import (
    decide_expansion,
    empty_reason,
    group_upstreams,
    mapped_instances,
    whole_state,
)
from services.scheduler.core.model import (
    ACTIVE,
    CLEAR,
    FAILED,
    NONE,
    QUEUED,
    REMOVED,
    SKIPPED,
    SUCCESS,
    DagRun,
    TaskInstance,
    TryKey,
    instance_key,
)
from services.scheduler.core.operations import stop
from services.scheduler.core.queuing import Candidate, CandidateGroup, Queuing
from services.scheduler.core.segments import expanded, not_special
from services.scheduler.core.together import decide_together, fresh_state

Decided = TypeVar("Decided")
Mapped: TypeAlias = Mapping[str, Mapping[str, str]]
DecideTask: TypeAlias = Callable[[TaskInstance, Mapping[str, str], Mapped | None], tuple[Sequence[Decided], str]]
"""The walk's decision of one instance, judged by this view and these mapped upstreams' states."""

Expansion: TypeAlias = TaskMapExpanded | TaskMapFailed | TaskRemoved | TaskSkipped | Candidate
Cleared: TypeAlias = TaskCleared | TaskKillRequested


def decide_mapped(queuing: Queuing, task_id: str, view: Mapping[str, str], dead: Collection[TryKey], paused: bool,
                  decide_task: DecideTask[Decided], *, together: bool, scheduler_id: str,
                  now: float) -> tuple[Sequence[Decided | Cleared | CandidateGroup], str]:
    """The mapped task's decisions in the walk, and its state there. ``together``: its instances outside a
    mapped group are decided together (the tests' reference decides each on its own)."""
    run = queuing.run
    whole = run.tasks.get(task_id) or TaskInstance(task_id)
    in_group = group_upstreams(queuing.dag.tasks[task_id], queuing.dag)
    outside = _mapped_outside(queuing, in_group)
    if whole.map_count <= 0:
        return decide_task(whole, _whole_view(queuing, in_group, view), outside)
    if whole.pending == CLEAR:
        return _clear_expansion(queuing, whole, now, scheduler_id), NONE
    if not in_group and together:
        return _decide_together(queuing, whole, view, dead, paused, decide_task, now)
    events: list[Decided] = []
    states: dict[str, str] = {}
    for instance in mapped_instances(run, task_id):
        index = instance.map_index
        mapped = outside if outside is None else {**outside, **_group_instances(queuing, in_group, index)}
        decided, states[f"{task_id}[{index}]"] = decide_task(instance, view, mapped)
        events += decided
    queuing.mapped_states[task_id] = states
    return events, whole_state(states)


def expand(queuing: Queuing, task: TaskDefinition, now: float) -> tuple[list[Expansion], str]:
    """A mapped task whose rule lets it run: its expansion, then its instances' first tries (or the
    task skipped when it expands to none, failed when it cannot expand). Instances of an earlier, longer
    expansion past the new count are removed."""
    run = queuing.run
    decision = decide_expansion(task, queuing.dag, run, queuing.scheduler_id, now)
    if isinstance(decision, TaskMapFailed):
        return [decision], FAILED
    done: list[Expansion] = [decision, *_past_the_expansion(run, task.task_id, decision.count, now)]
    if decision.count == 0:
        return [*done, TaskSkipped(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                                   reason=empty_reason(decision), at=now)], SKIPPED
    if group_upstreams(task, queuing.dag):  # in a mapped group: instance N waits for its upstreams' N
        return done, NONE
    # An instance cleared with its expansion (a re-expansion) keeps its try numbers: its next try is the next.
    queued = [Candidate(queuing, run.tasks.get(instance_key(task.task_id, index))
                        or TaskInstance(task.task_id, map_index=index), task, now)
              for index in range(decision.count)]
    return [*done, *queued], QUEUED


def _past_the_expansion(run: DagRun, task_id: str, count: int, now: float) -> list[TaskRemoved]:
    """Instances of an earlier expansion of the task past its new ``count`` (a whole clear, then fewer
    elements): each is removed (Airflow's ``removed``), so no table or count keeps a cleared ghost."""
    return [TaskRemoved(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, map_index=instance.map_index,
                        reason=f"mapped task {task_id} expanded again to {count} instances: map index "
                               f"{instance.map_index} is gone", at=now)
            for instance in sorted((item for item in run.tasks.values() if item.task_id == task_id
                                    and item.map_index >= count and item.state != REMOVED),
                                   key=lambda item: item.map_index)]


def _clear_expansion(queuing: Queuing, whole: TaskInstance, now: float, scheduler_id: str) -> list[Cleared]:
    """A mapped task cleared as a whole: its running instances are stopped, its ended ones cleared, and
    then the whole (TaskCleared at map index -1), which forgets the expansion: the task is expanded
    again from its inputs as they are then (Airflow's), its instances' tries counting on."""
    run, busy = queuing.run, False
    events: list[Cleared] = []
    for instance in mapped_instances(run, whole.task_id):
        if instance.state in ACTIVE:
            busy = True
            events += stop(run, instance, now, scheduler_id) if instance.pending else []
        elif instance.pending == CLEAR:
            events.append(TaskCleared(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                                      map_index=instance.map_index, try_number=instance.try_number,
                                      request_id=instance.pending_request, at=now))
    if not busy:
        events.append(TaskCleared(dag_id=run.dag_id, run_id=run.run_id, task_id=whole.task_id,
                                  try_number=whole.try_number, request_id=whole.pending_request, at=now))
    return events


def _decide_together(queuing: Queuing, whole: TaskInstance, view: Mapping[str, str], dead: Collection[TryKey],
                     paused: bool, decide_task: DecideTask[Decided],
                     now: float) -> tuple[Sequence[Decided | CandidateGroup], str]:
    """The instances of an expanded mapped task outside a mapped task group, decided together (together.py);
    whether its expansion is stale is read once, before the first instance is made a try to queue."""
    task_id, task = whole.task_id, queuing.dag.tasks[whole.task_id]
    fresh = fresh_state(queuing, task_id, view, paused) if not_special(task) else ""
    states: dict[str, str] = {}
    events = decide_together(queuing, expanded(task_id, whole.map_count), fresh, states, dead,
                             lambda instance: decide_task(instance, view, None), at=now,
                             queueable=lambda: not queuing.stale_expansion(task, 0))
    queuing.mapped_states[task_id] = states
    return events, whole_state(states)


def _mapped_outside(queuing: Queuing, in_group: list[str]) -> Mapped | None:
    if not in_group:
        return None
    return {task_id: states for task_id, states in queuing.mapped_states.items() if task_id not in in_group}


def _whole_view(queuing: Queuing, in_group: list[str], view: Mapping[str, str]) -> Mapping[str, str]:
    done = [up for up in in_group if queuing.mapped_states.get(up)]
    return {**view, **dict.fromkeys(done, SUCCESS)} if done else view


def _group_instances(queuing: Queuing, in_group: list[str], map_index: int) -> dict[str, dict[str, str]]:
    return {up: {f"{up}[{map_index}]": queuing.mapped_states.get(up, {}).get(f"{up}[{map_index}]", NONE)}
            for up in in_group}
