"""Airflow's state names (``airflow.utils.state``): what a task instance or a DAG run is in, for the
states a sensor waits for (``ExternalTaskSensor(allowed_states=[TaskInstanceState.SUCCESS])``)."""

from __future__ import annotations

from enum import Enum


class TaskInstanceState(str, Enum):
    """A task instance's states, as Airflow 3 names them (Tock's scheduler writes the same strings)."""

    REMOVED = "removed"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    RESTARTING = "restarting"
    FAILED = "failed"
    UP_FOR_RETRY = "up_for_retry"
    UP_FOR_RESCHEDULE = "up_for_reschedule"
    UPSTREAM_FAILED = "upstream_failed"
    SKIPPED = "skipped"
    DEFERRED = "deferred"

    def __str__(self) -> str:
        return self.value


class DagRunState(str, Enum):
    """A DAG run's states, as Airflow 3 names them."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class State:
    """Airflow's ``State``: the task instance states as constants (``State.SUCCESS``), and the sets of them."""

    NONE = None
    REMOVED = TaskInstanceState.REMOVED
    SCHEDULED = TaskInstanceState.SCHEDULED
    QUEUED = TaskInstanceState.QUEUED
    RUNNING = TaskInstanceState.RUNNING
    SUCCESS = TaskInstanceState.SUCCESS
    RESTARTING = TaskInstanceState.RESTARTING
    FAILED = TaskInstanceState.FAILED
    UP_FOR_RETRY = TaskInstanceState.UP_FOR_RETRY
    UP_FOR_RESCHEDULE = TaskInstanceState.UP_FOR_RESCHEDULE
    UPSTREAM_FAILED = TaskInstanceState.UPSTREAM_FAILED
    SKIPPED = TaskInstanceState.SKIPPED
    DEFERRED = TaskInstanceState.DEFERRED

    task_states: tuple[TaskInstanceState | None, ...] = (None, *TaskInstanceState)
    dag_states: tuple[DagRunState, ...] = tuple(DagRunState)
    finished: frozenset[TaskInstanceState] = frozenset({
        TaskInstanceState.SUCCESS, TaskInstanceState.FAILED, TaskInstanceState.SKIPPED,
        TaskInstanceState.UPSTREAM_FAILED, TaskInstanceState.REMOVED})
    unfinished: frozenset[TaskInstanceState | None] = frozenset({
        None, TaskInstanceState.SCHEDULED, TaskInstanceState.QUEUED, TaskInstanceState.RUNNING,
        TaskInstanceState.RESTARTING, TaskInstanceState.UP_FOR_RETRY, TaskInstanceState.UP_FOR_RESCHEDULE,
        TaskInstanceState.DEFERRED})
    failed_states: frozenset[TaskInstanceState] = frozenset({TaskInstanceState.FAILED,
                                                             TaskInstanceState.UPSTREAM_FAILED})
    success_states: frozenset[TaskInstanceState] = frozenset({TaskInstanceState.SUCCESS, TaskInstanceState.SKIPPED})
