"""Small state transitions of task instances shared by the folds of tries and of commands."""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.core.model import (
    CLEAR,
    FAILED,
    KILL,
    MARK_PREFIX,
    NONE,
    REMOVE,
    REMOVED,
    SKIPPED,
    UPSTREAM_FAILED,
    DagEntry,
    DagRun,
    SchedulerState,
    TaskInstance,
    TryKey,
)


def now_live(state: SchedulerState, key: TryKey, instance: TaskInstance) -> None:
    """The try was launched or its runner started: it has a silence deadline (timed again on start)."""
    state.unlaunched.pop(key, None)
    state.live[key] = None
    state.timers.watch(key, instance.try_number)


def forget_try(state: SchedulerState, key: TryKey) -> None:
    state.unlaunched.pop(key, None)
    state.live.pop(key, None)
    state.waiting.pop(key, None)
    state.timers.forget(key)


def end_try(state: SchedulerState, run: DagRun, instance: TaskInstance, outcome: str, at: float) -> None:
    """The current try ended with ``outcome`` (a state); then what a command asked for applies."""
    forget_try(state, (run.dag_id, run.run_id, instance.key))
    instance.state, instance.ended_at, instance.kill_requested = outcome, at, False
    apply_pending(state, run, instance, at)


def apply_pending(state: SchedulerState, run: DagRun, instance: TaskInstance, at: float) -> None:
    """After the try ended: a kill fails it for good, a removal removes it, a mark sets its state.
    A clear waits for its TaskCleared (a decision)."""
    pending = instance.pending
    if pending == KILL:
        instance.state, instance.retryable = FAILED, False
    elif pending == REMOVE:
        instance.state = REMOVED
    elif pending.startswith(MARK_PREFIX):
        set_marked(state, run, instance, pending[len(MARK_PREFIX):], at)
    if pending != CLEAR:
        instance.pending, instance.pending_request = "", ""


def set_marked(state: SchedulerState, run: DagRun, instance: TaskInstance, marked: str, at: float) -> None:
    """The instance takes the marked state for good; tasks downstream that had given up on it look again."""
    forget_try(state, (run.dag_id, run.run_id, instance.key))
    instance.state, instance.ended_at, instance.retryable = marked, at, False
    instance.pending, instance.pending_request = "", ""
    instance.deferred_try = instance.try_number  # a marked success waits on nothing
    reconsider_downstream(state, run, instance.task_id)


def reconsider_downstream(state: SchedulerState, run: DagRun, task_id: str) -> None:
    """Instances downstream of ``task_id`` that ended because of it (upstream failed, skipped) go back
    to waiting, so they follow its new state."""
    dag = state.dags.get(run.dag_id)
    for down in downstream_of(dag, task_id) if dag else ():
        instance = run.tasks.get(down)
        if instance is not None and instance.state in (UPSTREAM_FAILED, SKIPPED):
            instance.state = NONE


def downstream_of(dag: DagEntry, task_id: str) -> list[str]:
    """Every task downstream of ``task_id``, transitively."""
    return _closure(dag, task_id, lambda candidate, current: current in dag.tasks[candidate].upstream)


def upstream_of(dag: DagEntry, task_id: str) -> list[str]:
    """Every task upstream of ``task_id``, transitively."""
    return _closure(dag, task_id, lambda candidate, current: candidate in dag.tasks[current].upstream)


def _closure(dag: DagEntry, task_id: str, linked: Callable[[str, str], bool]) -> list[str]:
    found: list[str] = []
    frontier = [task_id]
    while frontier:
        current = frontier.pop()
        for candidate in dag.order:
            if linked(candidate, current) and candidate not in found and candidate != task_id:
                found.append(candidate)
                frontier.append(candidate)
    return found
