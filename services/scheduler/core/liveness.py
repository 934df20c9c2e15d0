"""Liveness of tries: silence deadlines, death on evidence, and adoption after a takeover.

Pure: the shell passes the evidence it has (how far it read the heartbeat log) and the
executors' answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schemas import TaskAdopted, TaskDeclaredDead
from services.scheduler.core.model import ACTIVE, DagRun, SchedulerState, TaskInstance, TryKey
from services.scheduler.core.run_deadlines import time_run, timeout_now
from services.scheduler.core.timers import Current, Timers


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the shell has seen of one partition's heartbeat log: the only grounds for a death.

    ``heard_until``: the partition of tock.heartbeats was read up to its end offset as fetched
    at that time, so every heartbeat written before then has been folded.
    ``reachable_since``: the log has been reachable without a break since then; runners that
    lost the broker get a whole timeout after it came back to deliver their backlog.
    """

    heard_until: float
    reachable_since: float = 0.0


def declared_dead(run: DagRun, instance: TaskInstance, now: float, scheduler_id: str,
                  timeout: float, start_timeout: float | None = None) -> TaskDeclaredDead:
    reason = f"no heartbeat for {timeout:g} s" if _has_started(instance) or start_timeout is None \
        else f"launched and not started within {start_timeout:g} s"
    return TaskDeclaredDead(dag_id=run.dag_id, run_id=run.run_id, task_id=instance.task_id,
                            map_index=instance.map_index, try_number=instance.try_number,
                            last_heartbeat_at=instance.last_heartbeat_at,
                            reason=reason, scheduler_id=scheduler_id, at=now)


# -- timers ----------------------------------------------------------------------------------

def _has_started(instance: TaskInstance) -> bool:
    return instance.started_at is not None or instance.last_heartbeat_at is not None


def silence_deadline(instance: TaskInstance, timeout: float, start_timeout: float | None = None) -> float | None:
    """When a launched or started try counts as dead if nothing more is heard from it.

    A try launched but not started yet (a Celery message waiting for a free worker, a pod
    waiting for a node) has ``start_timeout`` (default: the heartbeat timeout) from its launch
    or adoption; once its runner started, the heartbeat timeout runs from its last sign of life."""
    if _has_started(instance) or start_timeout is None:
        signs = [instance.launched_at, instance.started_at, instance.last_heartbeat_at, instance.adopted_at]
        wait = timeout
    else:
        signs, wait = [instance.launched_at, instance.adopted_at], start_timeout
    seen = [at for at in signs if at is not None]
    return max(seen) + wait if seen else None


def overdue_tries(state: SchedulerState, at: float, timeout: float, reachable_since: float = 0.0,
                  start_timeout: float | None = None) -> set[TryKey]:
    """Live tries that had been silent past their deadline at ``at`` (and for a whole heartbeat
    timeout since the log became reachable again). Reads the heap: only due tries are looked at."""
    if at <= reachable_since + timeout:
        return set()
    timers = _filed(state, timeout, start_timeout)
    overdue = set(timers.silence.due(at, _silence_now(state, timeout, start_timeout), strictly=True))
    if state.quarantined:  # nothing is decided for a quarantined DAG: no evidence to gather for it either
        overdue = {key for key in overdue if key[0] not in state.quarantined}
    return overdue


def dead_tries(state: SchedulerState, evidence: Evidence, timeout: float,
               start_timeout: float | None = None) -> set[TryKey]:
    """Live tries proven silent: overdue as of the point up to which their heartbeats were read."""
    return overdue_tries(state, evidence.heard_until, timeout, evidence.reachable_since, start_timeout)


def due_retries(state: SchedulerState, now: float) -> set[TryKey]:
    """Tries up for retry whose ``not_before`` has come."""
    return set(state.timers.retries.due(now, _retry_now(state), strictly=False))


def next_wakeup(state: SchedulerState, timeout: float, now: float, start_timeout: float | None = None) -> float | None:
    """The earliest time after ``now`` a retry falls due, a live try's silence deadline passes or a run
    times out.

    Times already past are left out: what is due is decided on every turn, and a time a
    decision cannot act on (a retry of a run whose DAG is gone, a death still waiting for
    evidence) must not turn the loop into a spin."""
    timers = _filed(state, timeout, start_timeout)
    times = [timers.retries.next_after(now, _retry_now(state)),
             timers.silence.next_after(now, _silence_now(state, timeout, start_timeout)),
             timers.runs.next_after(now, timeout_now(state))]
    return min((time for time in times if time is not None), default=None)


def reindex_timers(state: SchedulerState) -> None:
    """Rebuild the deadline heaps from the live and waiting tries and the open runs (after a state was
    restored)."""
    state.timers.clear()
    for key in state.live:
        if (instance := state.instance(key)) is not None:
            state.timers.watch(key, instance.try_number)
    for key in state.waiting:
        if (instance := state.instance(key)) is not None and instance.not_before is not None:
            state.timers.retry(key, instance.try_number, instance.not_before)
    for run in state.runs.values():
        time_run(state, run)


def _filed(state: SchedulerState, timeout: float, start_timeout: float | None) -> Timers:
    state.timers.file_fresh(_silence_now(state, timeout, start_timeout))
    return state.timers


def _silence_now(state: SchedulerState, timeout: float, start_timeout: float | None) -> Current:
    """A silence entry's deadline as the try stands now; None once the try is no longer live."""
    def current(key: TryKey, try_number: int) -> float | None:
        instance = state.instance(key)
        if instance is None or instance.try_number != try_number or instance.state not in ACTIVE \
                or key not in state.live:
            return None
        return silence_deadline(instance, timeout, start_timeout)
    return current


def _retry_now(state: SchedulerState) -> Current:
    def current(key: TryKey, try_number: int) -> float | None:
        instance = state.instance(key)
        if instance is None or instance.try_number != try_number or key not in state.waiting:
            return None
        return instance.not_before
    return current


# -- adoption --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Orphan:
    """A try the new owner must ask its executor about: executor from TaskQueued, handle from TaskLaunched."""

    key: TryKey
    try_number: int
    executor: str
    handle: str
    owner: str


def orphans(state: SchedulerState, scheduler_id: str) -> list[Orphan]:
    """Unfinished launched tries owned by another scheduler: what a takeover must probe."""
    found = []
    for key in state.live:
        instance = state.instance(key)
        if instance is not None and instance.state in ACTIVE and instance.owner != scheduler_id:
            found.append(Orphan(key, instance.try_number, instance.executor, instance.handle, instance.owner))
    return found


def decide_adoption(state: SchedulerState, now: float, scheduler_id: str,
                    alive: Mapping[TryKey, bool | None]) -> list[TaskAdopted]:
    """TaskAdopted for each orphan its executor found alive. The others are left to the heartbeat
    deadline (``dead_tries``), so a try is never declared dead before it fell silent."""
    events = []
    for orphan in orphans(state, scheduler_id):
        if alive.get(orphan.key) is True:
            dag_id, run_id, task_id = orphan.key
            events.append(TaskAdopted(dag_id=dag_id, run_id=run_id, task_id=task_id,
                                      try_number=orphan.try_number, handle=orphan.handle,
                                      by_scheduler=scheduler_id, from_scheduler=orphan.owner, at=now))
    return events
