"""ExternalTaskMarker (schemas/dags.py ``MarkerDefinition``): a recursive clear that clears a marker also
clears the task it names in another DAG, and what follows it there, as Airflow's "Recursive" clear does.

The owner of the cleared run's partition folds the clear and keeps the clears it asks of other DAGs; its
next decision writes them (``ClearTask`` on each other DAG's partition, with a request id derived from the
first, so a repeat is applied once) with ``ExternalClearsSent`` here, in one transaction. The other DAG's
owner clears its run at the logical date, and a marker among what it clears goes on, as deep as the first
marker's ``recursion_depth`` allows.
"""

from __future__ import annotations

import hashlib

from schemas import ClearTask, ExternalClearsSent
from services.scheduler.core.model import DagEntry, DagRun, SchedulerState

MarkerDecision = ClearTask | ExternalClearsSent


def asked_clears(dag: DagEntry, run: DagRun, event: ClearTask, targets: list[str]) -> list[ClearTask]:
    """The clears a recursive clear of ``targets`` asks of other DAGs: one per marker among them, none
    once the recursion is as deep as its first marker allows."""
    if not event.recursive or event.recursion_left == 0:
        return []
    clears = []
    for task_id in targets:
        marker = dag.tasks[task_id].marker if task_id in dag.tasks else None
        if marker is None:
            continue
        left = marker.recursion_depth - 1 if event.recursion_left < 0 else event.recursion_left - 1
        clears.append(ClearTask(
            dag_id=marker.external_dag_id, run_id="", task_id=marker.external_task_id,
            request_id=marker_request_id(event.request_id, dag.definition.dag_id, task_id), downstream=True,
            recursive=True, logical_date=marker.logical_date if marker.logical_date is not None else run.logical_date,
            recursion_left=left, requested_by=event.requested_by, at=event.at))
    return clears


def marker_request_id(request_id: str, dag_id: str, task_id: str) -> str:
    """The request id of the clear a marker asks for: the same for the same clear of the same marker."""
    digest = hashlib.sha256(f"{request_id}\x00{dag_id}\x00{task_id}".encode()).hexdigest()
    return f"marker-{digest[:40]}"


def decide_marker_clears(state: SchedulerState, now: float) -> list[MarkerDecision]:
    decided: list[MarkerDecision] = []
    for request_id, (dag_id, clears) in state.external_clears.items():
        decided += clears
        decided.append(ExternalClearsSent(dag_id=dag_id, request_id=request_id, at=now))
    return decided


def sent(state: SchedulerState, event: ExternalClearsSent) -> None:
    state.external_clears.pop(event.request_id, None)
