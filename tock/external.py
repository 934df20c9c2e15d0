"""``ExternalTaskSensor`` (Airflow's, from its standard provider): wait for tasks, a task group or the
run of another DAG, at the sensor's logical date (minus ``execution_delta``).

Airflow's sensor pokes the metadata database every ``poke_interval`` from a worker slot (or defers to a
triggerer). Tock's makes no poke and runs no try: when it may run, the owner of its DAG's partition asks
the owner of the awaited DAG's partition, in the log, to say when what it awaits is done, and the sensor
is ``deferred`` until the answer comes (services/scheduler/core/external.py). It holds no slot, no
process and no pool slot, and survives any restart of either side. ``poke_interval`` and ``mode`` are
accepted and have nothing to do; ``timeout`` and ``soft_fail`` apply as in Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.dags import ExternalWaitDefinition, MarkerDefinition
from tock.operators import EmptyOperator
from tock.sensors import BaseSensorOperator
from tock.states import DagRunState, TaskInstanceState

_TASK_STATES = frozenset(state.value for state in TaskInstanceState) | {"none"}
_RUN_STATES = frozenset(state.value for state in DagRunState)


class ExternalTaskSensor(BaseSensorOperator):
    """``ExternalTaskSensor(task_id, external_dag_id, external_task_id=None, external_task_ids=None,
    external_task_group_id=None, allowed_states=None, skipped_states=None, failed_states=None,
    execution_delta=None, check_existence=False, ...)``: succeed when the awaited tasks (or the run, when
    none is named) of ``external_dag_id``'s run at this run's logical date minus ``execution_delta`` are
    all in ``allowed_states`` (default success); skip when one is in ``skipped_states``; fail when one is
    in ``failed_states`` (default none: a failure of what it awaits keeps it waiting until ``timeout``, as
    Airflow's does). ``check_existence``: fail at once if the DAG or a task does not exist.
    ``execution_date_fn`` (code the scheduler would have to run) and templated ids are refused."""

    task_kind = "external_sensor"

    def __init__(self, *, task_id: str, external_dag_id: str, external_task_id: str | None = None,
                 external_task_ids: Collection[str] | None = None, external_task_group_id: str | None = None,
                 allowed_states: Iterable[str] | None = None, skipped_states: Iterable[str] | None = None,
                 failed_states: Iterable[str] | None = None, execution_delta: timedelta | None = None,
                 execution_date_fn: Callable[..., Any] | None = None, check_existence: bool = False,
                 poll_interval: float = 2.0, **settings: Any) -> None:
        self._wait = external_wait(task_id, external_dag_id, external_task_id, external_task_ids,
                                   external_task_group_id, allowed_states, skipped_states, failed_states,
                                   execution_delta, execution_date_fn, check_existence)
        self.external_dag_id = external_dag_id
        self.external_task_ids = list(self._wait.task_ids)
        self.external_task_id = external_task_id
        self.external_task_group_id = external_task_group_id
        self.allowed_states, self.skipped_states = list(self._wait.allowed_states), list(self._wait.skipped_states)
        self.failed_states, self.execution_delta = list(self._wait.failed_states), execution_delta
        self.check_existence, self.poll_interval = check_existence, poll_interval
        super().__init__(task_id=task_id, **settings)

    def _callable_fields(self) -> dict[str, Any]:
        return {"external": self._wait}

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        raise NotImplementedError("ExternalTaskSensor cannot be mapped in Tock yet: write one sensor per DAG")


def external_wait(task_id: str, dag_id: Any, task_id_given: Any, task_ids: Any, group_id: Any, allowed: Any,
                  skipped: Any, failed: Any, delta: Any, date_fn: Any, check_existence: Any) -> ExternalWaitDefinition:
    """What the sensor waits on, checked as Airflow checks it (a mistake is a ValueError naming the sensor)."""
    where = f"ExternalTaskSensor {task_id!r}"
    if not isinstance(dag_id, str) or not dag_id:
        raise ValueError(f"{where}: external_dag_id must be a DAG id, got {dag_id!r}")
    if task_id_given is not None and task_ids is not None:
        raise ValueError(f"{where}: give external_task_id or external_task_ids, not both")
    if group_id is not None and (task_id_given is not None or task_ids is not None):
        raise ValueError(f"{where}: give external_task_group_id or task ids, not both")
    ids = [task_id_given] if task_id_given is not None else list(task_ids) if task_ids is not None else []
    if isinstance(task_ids, str) or not all(isinstance(item, str) and item for item in ids):
        raise ValueError(f"{where}: external task ids must be a list of task ids, got {task_ids or task_id_given!r}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{where}: external_task_ids has duplicates: {ids}")
    if group_id is not None and (not isinstance(group_id, str) or not group_id):
        raise ValueError(f"{where}: external_task_group_id must be a task group id, got {group_id!r}")
    for text in (dag_id, group_id or "", *ids):
        if "{{" in text or "{%" in text:
            raise ValueError(f"{where}: {text!r} is a template; Tock decides the wait in the scheduler, "
                             "which renders nothing: name the DAG and tasks literally")
    if date_fn is not None:
        raise ValueError(f"{where}: execution_date_fn is code the scheduler would have to run; Tock decides "
                         "the wait on the log: use execution_delta")
    if delta is not None and not isinstance(delta, timedelta):
        raise ValueError(f"{where}: execution_delta must be a timedelta, got {delta!r}")
    if not isinstance(check_existence, bool):
        raise ValueError(f"{where}: check_existence must be True or False, got {check_existence!r}")
    valid = _TASK_STATES if ids or group_id else _RUN_STATES
    states = [_states(where, name, given, valid) for name, given in
              (("allowed_states", allowed), ("skipped_states", skipped), ("failed_states", failed))]
    states[0] = states[0] if allowed is not None else ["success"]
    named = [state for group in states for state in group]
    if len(set(named)) != len(named):
        raise ValueError(f"{where}: a state is named twice across allowed_states, skipped_states and "
                         f"failed_states: {named}")
    return ExternalWaitDefinition(external_dag_id=dag_id, task_ids=ids, task_group_id=group_id or "",
                                  allowed_states=states[0], skipped_states=states[1], failed_states=states[2],
                                  delta=delta.total_seconds() if delta is not None else 0.0,
                                  check_existence=check_existence)


def _states(where: str, name: str, given: Any, valid: frozenset[str]) -> list[str]:
    if given is None:
        return []
    if isinstance(given, str) or not isinstance(given, Iterable):
        raise ValueError(f"{where}: {name} must be a list of states, got {given!r}")
    values = ["none" if state is None else str(state.value if hasattr(state, "value") else state) for state in given]
    wrong = sorted(set(values) - valid)
    if wrong:
        raise ValueError(f"{where}: {name} names {', '.join(map(repr, wrong))}, not one of "
                         f"{', '.join(sorted(valid))}")
    return values


_DEFAULT_MARKER_DATE = "{{ logical_date.isoformat() }}"  # Airflow's default: the marker's own run


class ExternalTaskMarker(EmptyOperator):
    """``ExternalTaskMarker(task_id, external_dag_id, external_task_id, logical_date=None,
    recursion_depth=10)``: a task of another DAG depends on this one. It does nothing when it runs; when a
    clear with ``recursive`` clears it, ``external_task_id`` of ``external_dag_id``'s run at ``logical_date``
    (default: this run's) is cleared too, with what follows it, and so on through markers there, at most
    ``recursion_depth`` deep (Airflow's "Recursive" clear). ``logical_date`` may be a datetime; a template
    other than Airflow's default is refused (the scheduler renders nothing)."""

    def __init__(self, *, task_id: str, external_dag_id: str, external_task_id: str,
                 logical_date: str | datetime | None = _DEFAULT_MARKER_DATE, recursion_depth: int = 10,
                 **options: Any) -> None:
        where = f"ExternalTaskMarker {task_id!r}"
        for name, value in (("external_dag_id", external_dag_id), ("external_task_id", external_task_id)):
            if not isinstance(value, str) or not value or "{{" in value:
                raise ValueError(f"{where}: {name} must be a literal id, got {value!r}")
        if isinstance(recursion_depth, bool) or not isinstance(recursion_depth, int) or recursion_depth <= 0:
            raise ValueError(f"{where}: recursion_depth must be a positive int, got {recursion_depth!r}")
        self.external_dag_id, self.external_task_id = external_dag_id, external_task_id
        self.logical_date, self.recursion_depth = logical_date, recursion_depth
        super().__init__(task_id, **options)
        self.marker = MarkerDefinition(external_dag_id=external_dag_id, external_task_id=external_task_id,
                                       logical_date=_marker_date(where, logical_date),
                                       recursion_depth=recursion_depth)


def _marker_date(where: str, given: Any) -> float | None:
    if given is None or given == _DEFAULT_MARKER_DATE:
        return None
    if isinstance(given, datetime):
        return (given if given.tzinfo is not None else given.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"{where}: logical_date must be a datetime or Airflow's default template "
                     f"{_DEFAULT_MARKER_DATE!r} (the scheduler renders nothing), got {given!r}")
