"""What a queued try's TaskQueued records of its context: the run's dates, type and conf, the params
resolved for it, the data interval of the DAG's previous successful run, and the values of its
upstream tries (which try of each: the provenance of what it reads).

Recorded once, when the try is decided, so the runner (and a replay of the try) reads its context
from the log and never asks anyone what it was. A try's inputs are bounded: past INPUTS_LIMIT_BYTES
together the rest are recorded by their provenance only, and reading one fails that try, naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas import TaskDefinition, TaskQueued, TryInput
from schemas import params as dag_params
from schemas.schedule import data_interval
from services.scheduler.core.assets import inlet_events_json
from services.scheduler.core.mapping import (
    Expansion,
    Unmappable,
    element_json,
    expansion_of,
    group_upstreams,
    mapped_instances,
    mapped_over,
)
from services.scheduler.core.model import (
    SUCCESS,
    Alike,
    AssetSides,
    DagEntry,
    DagRun,
    SchedulerState,
    TaskInstance,
    instance_key,
)
from services.scheduler.core.segments import Member
from services.scheduler.core.trigger_rules import Verdict

# Bytes of upstream values, conf and params one TaskQueued carries at most (tock.events takes 16 MiB records).
INPUTS_LIMIT_BYTES = 12 * 1024 * 1024
CONF_LIMIT_BYTES = INPUTS_LIMIT_BYTES // 2  # of them, the run's conf: a larger one is refused (runs, backfills)

Interval = tuple[float | None, float | None]
Previous = Callable[[], Interval]


def no_previous() -> Interval:
    return None, None


class _OfOneWalk:
    """What a walk of one run would queue: named by that run."""

    __slots__ = ()
    queuing: Queuing

    @property
    def dag_id(self) -> str:
        return self.queuing.run.dag_id

    @property
    def run_id(self) -> str:
        return self.queuing.run.run_id


@dataclass(frozen=True, slots=True)
class Candidate(_OfOneWalk):
    """A try the walk of a run would queue, as its TaskQueued before it is built: the limits
    (limits.admit) choose among candidates by their ids, and only those admitted are built
    (``built``). Building one (its context, params, inputs) costs more than judging its task, and in
    a wide run held back by its limits most candidates are not admitted."""

    queuing: Queuing
    instance: TaskInstance
    task: TaskDefinition
    at: float

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def built(self) -> TaskQueued:
        return self.queuing.queued(self.instance, self.task, self.at)


@dataclass(frozen=True, slots=True)
class CandidateGroup(_OfOneWalk):
    """Task instances with nothing in the run yet, each a try the walk would queue (a Candidate), in walk
    order: tasks of one segment (segments.py), or instances of one expanded mapped task. The limits draw
    from them in priority order as far as there is room, and only the candidates drawn are made."""

    queuing: Queuing
    members: list[Member]
    # The segment's tasks in priority order (members and others) and their places in the walk; None: the
    # members' order is their priority order (a mapped task's instances, a segment of one weight).
    ranked: Sequence[Member] | None
    place: Mapping[Member, int]
    at: float

    def candidate(self, member: Member) -> Candidate:
        task_id, map_index = member
        return Candidate(self.queuing, TaskInstance(task_id, map_index=map_index), self.queuing.dag.tasks[task_id],
                         self.at)

    def in_priority_order(self) -> Iterator[Member]:
        if self.ranked is None:
            return iter(self.members)
        members = set(self.members)
        return (member for member in self.ranked if member in members)

    def in_walk_order(self, drawn: list[Member]) -> list[Member]:
        """Members drawn (in priority order), in the walk's order."""
        return drawn if self.ranked is None else sorted(drawn, key=self.place.__getitem__)


@dataclass
class Queuing:
    """Builds the TaskQueued of the tries one walk of a run decides."""

    run: DagRun
    dag: DagEntry
    scheduler_id: str
    previous: Previous = no_previous
    assets: AssetSides | None = None  # the partition's assets: what tasks with inlets read (core/assets.py)
    # The walk's states of each expanded mapped task's instances (``task[i]`` -> state), for the rules
    # of its downstream (trigger_rules.judge), and the expansions read, so each is read once per walk.
    mapped_states: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    # Verdicts of tasks judged alike in this walk (trigger_rules.alike): read once per walk.
    verdicts: dict[Alike, Verdict | None] = field(default_factory=dict, init=False)
    _expansions: dict[str, Expansion] = field(default_factory=dict, init=False)
    _interval: tuple[float, float] | None = field(default=None, init=False)
    _previous: Interval | None = field(default=None, init=False)

    def queued(self, instance: TaskInstance, task: TaskDefinition, now: float) -> TaskQueued:
        run, definition = self.run, self.dag.definition
        start, end = self.interval()
        conf, params = _bounded_json(run.conf_json), _params(definition.params_json, task.params_json, run.conf_json)
        previous_start, previous_end = self.previous_interval()
        element = self.element(task, instance.map_index)
        inlets = "" if self.assets is None else inlet_events_json(self.assets, run.dag_id, task)
        budget = (INPUTS_LIMIT_BYTES - len(conf) - len(params) - len(element) - len(run.asset_events_json)
                  - len(inlets))
        return TaskQueued(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id, map_index=instance.map_index,
                          map_element_json=element, try_number=instance.try_number + 1, executor=task.executor,
                          queue=task.queue,
                          scheduler_id=self.scheduler_id, run_type=run.run_type, logical_date=run.logical_date,
                          data_interval_start=start, data_interval_end=end, conf_json=conf, params_json=params,
                          triggering_asset_events_json=run.asset_events_json, inlet_events_json=inlets,
                          prev_data_interval_start_success=previous_start,
                          prev_data_interval_end_success=previous_end,
                          inputs=inputs_of(run, self.dag, task, budget, instance.map_index), at=now)

    def element(self, task: TaskDefinition, map_index: int) -> str:
        """An instance of a mapped task: its arguments, cut from its expansion's inputs ("" otherwise)."""
        if task.mapped is None or map_index < 0:
            return ""
        return element_json(task, self._expansion(task), map_index)

    def stale_expansion(self, task: TaskDefinition, map_index: int) -> str:
        """Why an instance of an expanded mapped task cannot be queued again ("" if it can): what the task
        maps over, read now, no longer gives its recorded number of instances (an upstream cleared alone
        ran again with another length, or did not succeed). Its element would not be its own."""
        if task.mapped is None or map_index < 0:
            return ""
        whole = self.run.tasks.get(task.task_id)
        count = whole.map_count if whole is not None else -1
        try:
            now = self._expansion(task).count
        except Unmappable as error:
            return (f"mapped task {task.task_id} was expanded to {count} instances, and what it maps over "
                    f"cannot be read again: {error}")
        if now == count:
            return ""
        return (f"mapped task {task.task_id} was expanded to {count} instances, but what it maps over now gives "
                f"{now}: clear {task.task_id} as a whole to expand it again")

    def _expansion(self, task: TaskDefinition) -> Expansion:
        expansion = self._expansions.get(task.task_id)
        if expansion is None:
            expansion = self._expansions[task.task_id] = expansion_of(task, self.dag, self.run)
        return expansion

    def interval(self) -> tuple[float, float]:
        if self._interval is None:
            definition = self.dag.definition
            self._interval = data_interval(definition.schedule, self.run.run_type, self.run.logical_date,
                                           definition.timezone, start_date=definition.start_date)
        return self._interval

    def previous_interval(self) -> Interval:
        if self._previous is None:
            self._previous = self.previous()
        return self._previous


def inputs_of(run: DagRun, dag: DagEntry, task: TaskDefinition, budget: int, map_index: int = -1) -> list[TryInput]:
    """The values of the task's upstream tries that succeeded and passed some, in upstream order (each
    instance of a mapped upstream, in map index order; of an upstream in the same mapped task group, the
    instance of the same map index); past ``budget`` bytes, their provenance only (``left_out``). A mapped
    task's instance does not read what it maps over: its element is its own."""
    found: list[TryInput] = []
    for instance in _upstream_instances(run, dag, task, map_index):
        if instance.state != SUCCESS or (not instance.values_json and instance.map_index < 0):
            continue  # (a mapped upstream's instance that passed nothing still has its place in the list)
        fits = len(instance.values_json) <= budget
        budget -= len(instance.values_json) if fits else 0
        found.append(TryInput(task_id=instance.task_id, try_number=instance.try_number, map_index=instance.map_index,
                              values_json=instance.values_json if fits else "", left_out=not fits))
    return found


def _upstream_instances(run: DagRun, dag: DagEntry, task: TaskDefinition, map_index: int) -> list[TaskInstance]:
    sources, in_group = mapped_over(task), group_upstreams(task, dag)
    found: list[TaskInstance] = []
    for upstream in task.upstream:
        definition = dag.tasks.get(upstream)
        if upstream in sources:
            continue
        if upstream in in_group:
            found += [run.tasks.get(instance_key(upstream, map_index)) or TaskInstance(upstream, map_index=map_index)]
        elif definition is not None and definition.mapped is not None:
            found += mapped_instances(run, upstream)
        elif (instance := run.tasks.get(upstream)) is not None:
            found.append(instance)
    return found


def previous_success(state: SchedulerState, dag: DagEntry, run: DagRun) -> Interval:
    """The data interval of the DAG's latest successful run (of those kept) before ``run``'s logical date."""
    latest = None
    for packed in state.finished.of_dag(run.dag_id):
        if packed.finished_state == SUCCESS and packed.logical_date < run.logical_date \
                and (latest is None or packed.logical_date > latest.logical_date):
            latest = packed
    if latest is None:
        return None, None
    definition = dag.definition
    return data_interval(definition.schedule, latest.run_type, latest.logical_date, definition.timezone,
                         start_date=definition.start_date)


def _params(dag_params_json: str, task_params_json: str, conf_json: str) -> str:
    """The params a try sees, as JSON. A conf that is not a JSON object (refused by the API; a command
    written to the log by other means) is left out: the params are then the DAG's and the task's."""
    try:
        values: dict[str, Any] = dag_params.for_task(dag_params_json, task_params_json, conf_json)
    except (ValueError, TypeError):
        values = dag_params.for_task(dag_params_json, task_params_json, "{}")
    return json.dumps(values, sort_keys=True, default=repr)


def conf_too_large(conf_json: str) -> str:
    """Why a run may not have this conf ("" if it may): each try's TaskQueued carries it whole."""
    if len(conf_json.encode()) <= CONF_LIMIT_BYTES:
        return ""
    return (f"the conf is {len(conf_json.encode()):,} bytes as JSON, over the {CONF_LIMIT_BYTES:,} a try's context "
            "carries: pass large inputs by reference (a path, a URL)")


def _bounded_json(conf_json: str) -> str:
    """The run's conf; "{}" for one over CONF_LIMIT_BYTES, which only a release before its refusal
    (``conf_too_large``) let a run have."""
    return conf_json if len(conf_json) <= CONF_LIMIT_BYTES else "{}"
