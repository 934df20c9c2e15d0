"""Dynamic task mapping in the owner's walk of a run (the authoring side is tock/mapping.py).

A mapped task is first a whole (its instance at map index -1). When its trigger rule lets it run, the
owner expands it, once: the number of instances is the product of its inputs' lengths (expand) or its
one input's length (expand_kwargs), each input a literal of the definition or the value an upstream
passed on (the upstream's TaskSucceeded ``values_json``; a mapped upstream's value is the list of its
instances'). That decision is a TaskMapExpanded; 0 instances skip the task, a value that is not a list
or dict, or more instances than ``max_map_length``, fail it (TaskMapFailed). Each instance's TaskQueued
carries its own element (``map_element_json``), cut from the same inputs, so a 10,000-way expansion
costs each try its element, not the whole list. Replay = live: the count is only ever read from the
fold of TaskMapExpanded, never decided again.

Values here are as tock/values.py encodes them (JSON with tagged types): the core never decodes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas import MapDefinition, MapInput, MapSource, TaskDefinition, TaskMapExpanded, TaskMapFailed
from services.scheduler.core.model import (
    ENDED,
    FAILED,
    NONE,
    SKIPPED,
    SUCCESS,
    UPSTREAM_FAILED,
    DagEntry,
    DagRun,
    SchedulerState,
    TaskInstance,
    instance_key,
)

TAG = "__tock__"  # tock/values.py's tag of an encoded non-JSON type
EXPAND_KWARGS = "expand_kwargs"
RETURN_VALUE = "return_value"


@dataclass(frozen=True, slots=True)
class Expansion:
    """The inputs of a mapped task as the owner read them: each input's encoded elements, in order."""

    sources: tuple[MapSource, ...]
    elements: tuple[tuple[Any, ...], ...]

    @property
    def count(self) -> int:
        return math.prod(len(items) for items in self.elements) if self.elements else 0


class Unmappable(ValueError):
    """What a mapped task maps over cannot be expanded; the message says why."""


# -- deciding ----------------------------------------------------------------------------------

def expansion_of(task: TaskDefinition, dag: DagEntry, run: DagRun) -> Expansion:
    """The task's inputs as they are now in ``run``; raises Unmappable naming the value."""
    mapped = _mapping(task)
    read = [_read_input(item, dag, run) for item in mapped.inputs]
    expansion = Expansion(tuple(source for sources, _ in read for source in sources), tuple(items for _, items in read))
    if expansion.count > mapped.max_map_length:
        lengths = " x ".join(str(len(items)) for items in expansion.elements)
        raise Unmappable(f"it would expand to {expansion.count} instances ({lengths}), more than its "
                         f"max_map_length {mapped.max_map_length}")
    return expansion


def decide_expansion(task: TaskDefinition, dag: DagEntry, run: DagRun, scheduler_id: str,
                     now: float) -> TaskMapExpanded | TaskMapFailed:
    """The owner's decision on a mapped task whose trigger rule lets it run."""
    try:
        expansion = expansion_of(task, dag, run)
    except Unmappable as error:
        return TaskMapFailed(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                             reason=f"cannot expand mapped task {task.task_id}: {error}", scheduler_id=scheduler_id,
                             at=now)
    return TaskMapExpanded(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id, count=expansion.count,
                           sources=list(expansion.sources), scheduler_id=scheduler_id, at=now)


def empty_reason(expanded: TaskMapExpanded) -> str:
    names = ", ".join(dict.fromkeys(source.name or "kwargs" for source in expanded.sources if source.length == 0))
    return f"mapped task {expanded.task_id} expanded to no instances: {names or 'its input'} is empty"


def element_json(task: TaskDefinition, expansion: Expansion, map_index: int) -> str:
    """The arguments instance ``map_index`` runs with, as a JSON object of encoded values, cut from the
    inputs its expansion read (they have ended, so they read the same at each of its instances)."""
    mapped = _mapping(task)
    if mapped.kind == EXPAND_KWARGS:
        item = expansion.elements[0][map_index]
        return json.dumps(item if isinstance(item, dict) and TAG not in item else {"": item},
                          separators=(",", ":"))
    picks = product_indexes(map_index, [len(items) for items in expansion.elements])
    element = {item.name: items[pick] for item, items, pick in zip(mapped.inputs, expansion.elements, picks,
                                                                     strict=True)}
    return json.dumps(element, separators=(",", ":"))


def product_indexes(map_index: int, lengths: list[int]) -> list[int]:
    """The index into each input of element ``map_index`` of their cartesian product, the last input
    varying fastest (Airflow's order)."""
    picks: list[int] = []
    for length in reversed(lengths):
        map_index, pick = divmod(map_index, length)
        picks.append(pick)
    return picks[::-1]


def _mapping(task: TaskDefinition) -> MapDefinition:
    if task.mapped is None:
        raise ValueError(f"task {task.task_id} is not mapped")
    return task.mapped


def source_task_ids(item: MapInput) -> list[str]:
    """The upstream tasks whose values one input reads (none for a literal)."""
    return list(item.zip_task_ids) if item.zip_task_ids else [item.task_id] if item.task_id else []


def mapped_over(task: TaskDefinition) -> set[str]:
    """The upstream tasks whose values a mapped task expands over."""
    return {task_id for item in task.mapped.inputs for task_id in source_task_ids(item)} if task.mapped else set()


def _read_input(item: MapInput, dag: DagEntry, run: DagRun) -> tuple[list[MapSource], tuple[Any, ...]]:
    """Where the input came from (a source per zipped value), and its encoded elements."""
    name = item.name or "kwargs"
    if item.zip_task_ids:
        return _read_zip(item, dag, run)
    if not item.task_id:
        elements = elements_of(json.loads(item.literal_json), f"argument {name}")
        return [MapSource(name=item.name, length=len(elements))], elements
    return _read_upstream(item.name, item.task_id, item.key, dag, run)


def _read_upstream(name: str, task_id: str, key: str, dag: DagEntry,
                   run: DagRun) -> tuple[list[MapSource], tuple[Any, ...]]:
    value, try_number = upstream_value(task_id, key, dag, run)
    elements = elements_of(value, f"argument {name or 'kwargs'} (the value {key!r} of {task_id})")
    return [MapSource(name=name, length=len(elements), task_id=task_id, try_number=try_number)], elements


def _read_zip(item: MapInput, dag: DagEntry, run: DagRun) -> tuple[list[MapSource], tuple[Any, ...]]:
    """Element N of zipped values is the tuple of their elements N (Airflow's XComArg.zip): as many as
    the shortest has, or with a fill value as many as the longest, the shorter ones filled."""
    parts = [_read_upstream(item.name, task_id, key, dag, run)
             for task_id, key in zip(item.zip_task_ids, item.zip_keys, strict=True)]
    columns = [elements for _sources, elements in parts]
    filled = bool(item.zip_fill_json)
    fill = json.loads(item.zip_fill_json) if filled else None
    count = max(map(len, columns)) if filled else min(map(len, columns))
    rows = tuple({TAG: "tuple", "value": [column[index] if index < len(column) else fill for column in columns]}
                 for index in range(count))
    return [source for sources, _elements in parts for source in sources], rows


def upstream_value(task_id: str, key: str, dag: DagEntry, run: DagRun) -> tuple[Any, int]:
    """(encoded value, try number) an upstream passed on under ``key``; a mapped upstream's is the list of
    its instances' values in map index order (try number 0)."""
    upstream = dag.tasks.get(task_id)
    if upstream is not None and upstream.mapped is not None:
        return [_value_of(instance, key) for instance in mapped_instances(run, task_id)], 0
    instance = run.tasks.get(task_id)
    if instance is None or instance.state != SUCCESS:
        raise Unmappable(f"upstream {task_id} did not succeed ({instance.state if instance else NONE}): "
                         "there is nothing to map over")
    values = json.loads(instance.values_json) if instance.values_json else {}
    if key == RETURN_VALUE and key not in values:
        return None, instance.try_number  # it returned None: nothing to map over (elements_of names it)
    if key not in values:
        raise Unmappable(f"upstream {task_id} passed no value under {key!r} (it passed "
                         f"{', '.join(sorted(values)) or 'none'})")
    return values[key], instance.try_number


def _value_of(instance: TaskInstance, key: str) -> Any:
    values = json.loads(instance.values_json) if instance.values_json else {}
    return values.get(key)


def elements_of(value: Any, what: str) -> tuple[Any, ...]:
    """The encoded elements of a list, tuple or dict (a dict's as (key, value) tuples); raises Unmappable
    naming the type of anything else (Airflow maps over lists and dicts only)."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        tag = value.get(TAG)
        if tag is None:
            return tuple(_pair(key, item) for key, item in value.items())
        if tag == "tuple":
            return tuple(value["value"])
        if tag == "dict":
            return tuple(_pair(key, item) for key, item in value["value"])
        raise Unmappable(f"{what} is a {tag}, not a list or dict")
    kind = "None" if value is None else {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "?")
    raise Unmappable(f"{what} is a {kind}, not a list or dict")


def _pair(key: Any, item: Any) -> dict[str, Any]:
    return {TAG: "tuple", "value": [key, item]}


def group_upstreams(task: TaskDefinition, dag: DagEntry) -> list[str]:
    """The upstreams of a task of a mapped task group that are in the same group: its instance N waits
    for their instance N, and reads its value."""
    group = task.mapped.group if task.mapped is not None else ""
    if not group:
        return []
    return [up for up in task.upstream
            if (definition := dag.tasks.get(up)) is not None and definition.mapped is not None
            and definition.mapped.group == group]


# -- states ------------------------------------------------------------------------------------

def mapped_instances(run: DagRun, task_id: str) -> list[TaskInstance]:
    """The instances of an expanded mapped task in map index order (none before its expansion)."""
    whole = run.tasks.get(task_id)
    count = whole.map_count if whole is not None else -1
    return [run.tasks.get(instance_key(task_id, index)) or TaskInstance(task_id, map_index=index)
            for index in range(max(count, 0))]


def instance_states(run: DagRun, task_id: str) -> dict[str, str]:
    """``task[i]`` -> state of each instance of an expanded mapped task (what its downstream count)."""
    return {f"{task_id}[{instance.map_index}]": instance.state for instance in mapped_instances(run, task_id)}


def whole_state(states: Mapping[str, str]) -> str:
    """A mapped task's state as a whole, from its instances': running while one is, then failed if one
    failed (or gave up), skipped if all skipped, else success."""
    values = list(states.values())
    unended = next((state for state in values if state not in ENDED), None)
    if unended is not None:
        return unended
    for state in (FAILED, UPSTREAM_FAILED):
        if state in values:
            return state
    return SKIPPED if values and all(state == SKIPPED for state in values) else SUCCESS


# -- folding -----------------------------------------------------------------------------------

def expanded(state: SchedulerState, event: TaskMapExpanded) -> None:
    """The whole of a mapped task records its count, once: its instances are keyed ``task|i``."""
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    whole = run.instance(event.task_id)
    if whole.state == NONE and whole.map_count < 0:
        whole.map_count = event.count


def map_failed(state: SchedulerState, event: TaskMapFailed) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    whole = run.instance(event.task_id)
    if whole.state == NONE and whole.map_count < 0:
        whole.state, whole.ended_at, whole.retryable = FAILED, event.at, False
