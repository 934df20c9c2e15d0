"""Decisions that carry out what operators asked, and what the DAG files no longer hold.

A running or queued try is stopped first (TaskKillRequested, once); removed tasks and the
runs of a deleted DAG end naming why. Commands the state could not apply are recorded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, TypeAlias

from schemas import CommandRejected, DagRunFinished, TaskDeclaredDead, TaskKillRequested, TaskRemoved
from services.scheduler.core.liveness import declared_dead
from services.scheduler.core.model import (
    ACTIVE,
    CLEAR,
    KILL,
    MARK_PREFIX,
    REMOVED,
    SKIPPED,
    SUCCESS,
    DagEntry,
    DagRun,
    SchedulerState,
    TaskInstance,
    TryKey,
)

if TYPE_CHECKING:  # decide.py imports this module
    from services.scheduler.core.decide import Policy

Removal: TypeAlias = TaskDeclaredDead | TaskKillRequested | TaskRemoved
"""What removing a task instance writes: its try's death, a stop of its running try, or its removal."""

_REASONS = {CLEAR: "cleared", KILL: "killed by an operator"}


def stop(run: DagRun, instance: TaskInstance, now: float, scheduler_id: str,
         reason: str = "") -> list[TaskKillRequested]:
    """Ask the runner of the instance's try to stop its user code (once)."""
    if instance.kill_requested:
        return []
    reason = reason or _REASONS.get(instance.pending, "") or _marked_reason(instance.pending)
    return [TaskKillRequested(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                              map_index=instance.map_index, try_number=instance.try_number, reason=reason,
                              scheduler_id=scheduler_id, at=now)]


def decide_rejections(state: SchedulerState, now: float, scheduler_id: str) -> list[CommandRejected]:
    return [CommandRejected(dag_id=rejection.dag_id, request_id=request_id, command=rejection.command,
                            reason=rejection.reason, scheduler_id=scheduler_id, at=now)
            for request_id, rejection in state.rejections.items()]


def decide_removed_tasks(run: DagRun, dag: DagEntry, now: float, policy: Policy,
                         dead: Collection[TryKey]) -> list[Removal]:
    """Instances of tasks no longer in the DAG: stopped if running, then removed."""
    # An instance's key is its task id, or a mapped task's ``task|i``: only such keys can be a removed task's.
    suspects = run.tasks.keys() - dag.tasks.keys()
    if not any(run.tasks[key].task_id not in dag.tasks for key in suspects):
        return []
    events: list[Removal] = []
    for instance in run.tasks.values():  # (keyed by instance: a mapped task's are task|N)
        if instance.task_id not in dag.tasks:
            reason = f"task {instance.task_id} is no longer in DAG {run.dag_id}"
            events += _remove(run, instance, now, policy, dead, reason)
    return events


def decide_deleted_dag_run(run: DagRun, gone: DagEntry, now: float, policy: Policy,
                           dead: Collection[TryKey]) -> list[Removal | DagRunFinished]:
    """A run whose DAG was deleted: every unfinished task is removed (running ones stopped first),
    then the run fails naming why."""
    reason = f"DAG {run.dag_id} was deleted (its file is gone)"
    events: list[Removal | DagRunFinished] = []
    for task_id in dict.fromkeys([*gone.order, *run.tasks]):
        events += _remove(run, run.tasks.get(task_id) or TaskInstance(task_id), now, policy, dead, reason)
    if not any(instance.state in ACTIVE for instance in run.tasks.values()):
        events.append(DagRunFinished(dag_id=run.dag_id, run_id=run.run_id, state="failed", reason=reason, at=now))
    return events


def _remove(run: DagRun, instance: TaskInstance, now: float, policy: Policy, dead: Collection[TryKey],
            reason: str) -> list[Removal]:
    if (run.dag_id, run.run_id, instance.key) in dead:
        return [declared_dead(run, instance, now, policy.scheduler_id, policy.heartbeat_timeout, policy.start_timeout)]
    if instance.state in ACTIVE:
        return [*stop(run, instance, now, policy.scheduler_id, reason)]
    if instance.state in (SUCCESS, SKIPPED, REMOVED):
        return []
    return [TaskRemoved(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id, reason=reason, at=now)]


def _marked_reason(pending: str) -> str:
    return f"marked {pending[len(MARK_PREFIX):]} by an operator" if pending.startswith(MARK_PREFIX) else ""
