"""Pods of the Kubernetes executor, as the core sees them: what the watcher reports, folded.

The watcher of a scheduler reports the pods of its partitions (PodStarted, PodFinished). A
runner's outcome is in the log before its process, and so its pod, has ended; a try still
active when its PodFinished is folded therefore ended without one (OOM-killed, its command
missing, its node's agent lost it), and its TaskFailed is the scheduler's to write, with the
pod's reason. Which pod events are worth writing is decided here too: once per pod and try.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas import PodFinished, PodStarted, TaskFailed
from services.scheduler.core.model import ACTIVE, DagRun, SchedulerState, TaskInstance, instance_key


def pod_failure(event: PodFinished) -> str:
    """Why the try failed, in the words users of Kubernetes know."""
    reason = event.reason or ("Completed" if event.phase == "Succeeded" else "Error")
    code = "" if event.exit_code is None else f", exit code {event.exit_code}"
    return f"pod {event.pod_name} ended {event.phase} ({reason}{code}) without an outcome from its runner"


def failed_with_pod(run: DagRun, instance: TaskInstance, now: float) -> TaskFailed:
    return TaskFailed(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id, map_index=instance.map_index,
                      try_number=instance.try_number, runner_id=instance.runner_id, error=instance.pod_ended,
                      at=now)


def pod_ended_without_outcome(instance: TaskInstance) -> bool:
    return bool(instance.pod_ended) and instance.state in ACTIVE


def worth_writing(state: SchedulerState, observed: Iterable[PodStarted | PodFinished],
                  written: set[tuple[str, str]]) -> list[PodStarted | PodFinished]:
    """The observations to write, each once per pod (``written``: (kind, pod uid), updated; a relist
    after a broken watch repeats what was seen). Every pod's end is history worth keeping, whatever
    became of its try; a pod's start only while its try is current and active."""
    worth = []
    for event in observed:
        mark = (type(event).__name__, event.pod_uid)
        if mark in written or (isinstance(event, PodStarted) and not _current_and_active(state, event)):
            continue
        written.add(mark)
        worth.append(event)
    return worth


def _current_and_active(state: SchedulerState, event: PodStarted) -> bool:
    instance = state.instance((event.dag_id, event.run_id, instance_key(event.task_id, event.map_index)))
    return instance is not None and instance.try_number == event.try_number and instance.state in ACTIVE


def try_has_ended(state: SchedulerState, key: tuple[str, str, str, int]) -> bool:
    """Whether the try a finished pod ran has its outcome folded (so the pod may be deleted once its
    PodFinished is written)."""
    instance = state.instance(key[:3])
    return instance is None or instance.try_number != key[3] or instance.state not in ACTIVE
