"""What a queued try's TaskQueued records of its context: the run's dates, type and conf, the params
resolved for it, the data interval of the DAG's previous successful run, and the values of its
upstream tries (which try of each: the provenance of what it reads).

Recorded once, when the try is decided, so the runner (and a replay of the try) reads its context
from the log and never asks anyone what it was. A try's inputs are bounded: past INPUTS_LIMIT_BYTES
together the rest are recorded by their provenance only, and reading one fails that try, naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schemas import TaskDefinition, TaskQueued, TryInput
from schemas import params as dag_params
from schemas.schedule import data_interval
from services.scheduler.core.model import SUCCESS, DagEntry, DagRun, SchedulerState, TaskInstance

# Bytes of upstream values, conf and params one TaskQueued carries at most (tock.events takes 16 MiB records).
INPUTS_LIMIT_BYTES = 12 * 1024 * 1024

Interval = tuple[float | None, float | None]
Previous = Callable[[], Interval]


def no_previous() -> Interval:
    return None, None


@dataclass
class Queuing:
    """Builds the TaskQueued of the tries one walk of a run decides."""

    run: DagRun
    dag: DagEntry
    scheduler_id: str
    previous: Previous = no_previous
    _interval: tuple[float, float] | None = field(default=None, init=False)
    _previous: Interval | None = field(default=None, init=False)

    def queued(self, instance: TaskInstance, task: TaskDefinition, now: float) -> TaskQueued:
        run, definition = self.run, self.dag.definition
        start, end = self.interval()
        conf, params = _bounded_json(run.conf_json), _params(definition.params_json, task.params_json, run.conf_json)
        previous_start, previous_end = self.previous_interval()
        return TaskQueued(dag_id=run.dag_id, run_id=run.run_id, task_id=task.task_id,
                          try_number=instance.try_number + 1, executor=task.executor, queue=task.queue,
                          scheduler_id=self.scheduler_id, run_type=run.run_type, logical_date=run.logical_date,
                          data_interval_start=start, data_interval_end=end, conf_json=conf, params_json=params,
                          prev_data_interval_start_success=previous_start,
                          prev_data_interval_end_success=previous_end,
                          inputs=inputs_of(run, task, INPUTS_LIMIT_BYTES - len(conf) - len(params)), at=now)

    def interval(self) -> tuple[float, float]:
        if self._interval is None:
            self._interval = data_interval(self.dag.definition.schedule, self.run.run_type, self.run.logical_date)
        return self._interval

    def previous_interval(self) -> Interval:
        if self._previous is None:
            self._previous = self.previous()
        return self._previous


def inputs_of(run: DagRun, task: TaskDefinition, budget: int) -> list[TryInput]:
    """The values of the task's upstream tries that succeeded and passed some, in upstream order; past
    ``budget`` bytes, their provenance only (``left_out``)."""
    found: list[TryInput] = []
    for upstream in task.upstream:
        instance = run.tasks.get(upstream)
        if instance is None or instance.state != SUCCESS or not instance.values_json:
            continue
        fits = len(instance.values_json) <= budget
        budget -= len(instance.values_json) if fits else 0
        found.append(TryInput(task_id=upstream, try_number=instance.try_number,
                              values_json=instance.values_json if fits else "", left_out=not fits))
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
    return data_interval(dag.definition.schedule, latest.run_type, latest.logical_date)


def _params(dag_params_json: str, task_params_json: str, conf_json: str) -> str:
    """The params a try sees, as JSON. A conf that is not a JSON object (refused by the API; a command
    written to the log by other means) is left out: the params are then the DAG's and the task's."""
    try:
        values: dict[str, Any] = dag_params.for_task(dag_params_json, task_params_json, conf_json)
    except (ValueError, TypeError):
        values = dag_params.for_task(dag_params_json, task_params_json, "{}")
    return json.dumps(values, sort_keys=True, default=repr)


def _bounded_json(conf_json: str) -> str:
    return conf_json if len(conf_json) <= INPUTS_LIMIT_BYTES // 2 else "{}"
