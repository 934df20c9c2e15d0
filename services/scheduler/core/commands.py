"""Folding operators' commands, and the decisions that carry them out.

A command is applied once per request id while the partition remembers that id (its latest
``request_ids_kept``, retention.py): a repeat changes nothing. A trigger is applied once for ever
(its run id derives from its request id, and a finished run, even forgotten, is known). One the
state cannot apply becomes a Rejection until ``decide`` records it as CommandRejected. A command
never touches a try that is running or queued: it says what happens once that try has ended
(``TaskInstance.pending``), ``decide`` asks the runner to stop it (TaskKillRequested), and the
rest follows when the try's end is in the log.
"""

from __future__ import annotations

from schemas import (
    BackfillFinished,
    BackfillPlanned,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    DagRunReopened,
    KillTask,
    MarkTask,
    RequestBackfill,
    TaskCleared,
    TaskKilled,
    TaskKillRequested,
    TaskRemoved,
    TaskSkipped,
    TriggerDagRun,
)
from schemas import schedule as cron
from schemas.runs import manual_run_id
from schemas.tasks import instance_name
from services.scheduler.core.external import run_at
from services.scheduler.core.instances import (
    downstream_of,
    end_try,
    forget_try,
    reconsider_downstream,
    set_marked,
    upstream_of,
)
from services.scheduler.core.markers import asked_clears
from services.scheduler.core.model import (
    ACTIVE,
    CLEAR,
    DEFERRED,
    FAILED,
    KILL,
    MARK_PREFIX,
    NONE,
    POKED,
    REMOVED,
    SKIPPED,
    SUCCESS,
    UP_FOR_RETRY,
    Backfill,
    DagEntry,
    DagRun,
    Rejection,
    SchedulerState,
    TaskInstance,
    instance_key,
    logical_date_iso,
)
from services.scheduler.core.retention import forgotten_reason, remember_request, was_forgotten
from services.scheduler.core.run_deadlines import time_run

MARKABLE = (SUCCESS, FAILED, SKIPPED)


# -- commands ---------------------------------------------------------------------------------

def trigger(state: SchedulerState, event: TriggerDagRun) -> None:
    key = (event.dag_id, manual_run_id(event.request_id))
    if event.logical_date is not None and not cron.in_calendar(event.logical_date):
        if event.request_id not in state.requests:  # refused once, however often it is repeated
            _reject(state, event.dag_id, event.request_id, "TriggerDagRun",
                    f"the logical date {event.logical_date!r} is outside the calendar (years 1-9999)")
        return
    if key not in state.runs and key not in state.finished and not was_forgotten(state, *key) \
            and event.request_id not in state.requests:  # (a trigger refused for its conf, repeated)
        state.triggers.setdefault(key, event)


def clear(state: SchedulerState, event: ClearTask) -> None:
    if _seen(state, event.request_id):
        return
    target = _target(state, event, event.task_id)
    if isinstance(target, str):
        return _reject(state, event.dag_id, event.request_id, "ClearTask", target)
    run, dag = target
    problem = map_index_problem(run, dag, event.task_id, event.map_index)
    if problem:
        return _reject(state, event.dag_id, event.request_id, "ClearTask", problem)
    reopen(state, run, event.request_id)
    targets = _clear_targets(dag, event)
    asked = asked_clears(dag, run, event, targets)
    if asked:
        state.external_clears[event.request_id] = (event.dag_id, asked)
    for task_id in targets:
        map_index = event.map_index if task_id == event.task_id else -1
        for instance in commanded(run, dag, task_id, map_index):
            if instance.state != NONE:
                instance.pending, instance.pending_request = CLEAR, event.request_id
        whole = run.tasks.get(task_id)
        if map_index < 0 and whole is not None and whole.map_count > 0:  # cleared as a whole: expanded again
            whole.pending, whole.pending_request = CLEAR, event.request_id


def mark(state: SchedulerState, event: MarkTask) -> None:
    if _seen(state, event.request_id):
        return
    target = _target(state, event, event.task_id or "?")
    if not isinstance(target, str) and event.state not in MARKABLE:
        target = f"cannot mark a task {event.state!r}: use one of {', '.join(MARKABLE)}"
    if not isinstance(target, str):
        target = map_index_problem(*target, event.task_id, event.map_index) or target
    if isinstance(target, str):
        return _reject(state, event.dag_id, event.request_id, "MarkTask", target)
    run, dag = target
    reopen(state, run, event.request_id)
    for instance in commanded(run, dag, event.task_id, event.map_index):
        if instance.state in ACTIVE:
            instance.pending, instance.pending_request = MARK_PREFIX + event.state, event.request_id
        else:
            set_marked(state, run, instance, event.state, event.at)


def kill(state: SchedulerState, event: KillTask) -> None:
    if _seen(state, event.request_id):
        return
    run, dag = state.runs.get((event.dag_id, event.run_id)), state.dags.get(event.dag_id)
    instances = commanded(run, dag, event.task_id, event.map_index) if run is not None and dag is not None else []
    active = [instance for instance in instances if instance.state in ACTIVE]
    if not active:
        named = instance_name(event.task_id, event.map_index)
        problem = f"task {named} of run {event.run_id} has no running or queued try"
        if run is None and was_forgotten(state, event.dag_id, event.run_id):
            problem = f"{forgotten_reason(state, event.dag_id, event.run_id)}: {problem}"
        return _reject(state, event.dag_id, event.request_id, "KillTask", problem)
    for instance in active:
        instance.pending, instance.pending_request = KILL, event.request_id


def request_backfill(state: SchedulerState, event: RequestBackfill) -> None:
    if event.request_id in state.backfills:  # still under way (however long ago its id was forgotten)
        return
    if not _seen(state, event.request_id):
        state.backfill_requests[event.request_id] = event


def cancel_backfill(state: SchedulerState, event: CancelBackfill) -> None:
    backfill = state.backfills.get(event.backfill_id)
    if backfill is not None:
        backfill.cancelled = True
    elif state.backfill_requests.pop(event.backfill_id, None) is not None:
        state.backfills[event.backfill_id] = Backfill(event.dag_id, [], False, "{}", cancelled=True)


# -- decisions that carry them out ------------------------------------------------------------

def rejected(state: SchedulerState, event: CommandRejected) -> None:
    state.rejections.pop(event.request_id, None)
    state.backfill_requests.pop(event.request_id, None)
    if event.command == "TriggerDagRun":  # refused for its conf (runs.py): no run is created for it
        state.triggers.pop((event.dag_id, manual_run_id(event.request_id)), None)
    remember_request(state, event.request_id)


def kill_requested(state: SchedulerState, event: TaskKillRequested) -> None:
    current = _current_try(state, event)
    if current is None:
        return
    run, instance = current
    instance.kill_requested = True
    if not instance.runner_id:  # no runner claimed it first: by the claim rule, none ever will run it
        end_try(state, run, instance, FAILED, event.at)


def killed(state: SchedulerState, event: TaskKilled) -> None:
    current = _current_try(state, event)
    if current is None:
        return
    run, instance = current
    if instance.runner_id in ("", event.runner_id):
        end_try(state, run, instance, FAILED, event.at)


def cleared(state: SchedulerState, event: TaskCleared) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    key = instance_key(event.task_id, event.map_index)
    instance = run.tasks.get(key) if run else None
    if run is None or instance is None or instance.state in ACTIVE or instance.try_number != event.try_number:
        return
    forget_try(state, (event.dag_id, event.run_id, key))
    # (a mapped task's whole forgets its expansion: it is expanded again, services/scheduler/core/mapping.py)
    run.tasks[key] = TaskInstance(event.task_id, try_number=instance.try_number, map_index=event.map_index,
                                  pokes=instance.pokes)
    reconsider_downstream(state, run, event.task_id)


def skipped(state: SchedulerState, event: TaskSkipped) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    if run is None:
        return
    instance = run.instance(event.task_id, event.map_index)
    if instance.state in (UP_FOR_RETRY, POKED, DEFERRED):  # its run timed out (timeouts.py): nothing more comes
        forget_try(state, (event.dag_id, event.run_id, instance.key))
        instance.state = NONE
    if instance.state == NONE:
        instance.state = SKIPPED


def removed(state: SchedulerState, event: TaskRemoved) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    instance = run.instance(event.task_id, event.map_index) if run else None
    if instance is not None and instance.state not in ACTIVE:
        forget_try(state, (event.dag_id, event.run_id, instance.key))
        instance.state, instance.pending, instance.ended_at = REMOVED, "", event.at


def reopened(state: SchedulerState, event: DagRunReopened) -> None:
    key = (event.dag_id, event.run_id)
    run = state.finished.pop(key, None)
    if run is not None:
        run.finished_state = ""
        state.runs[key] = run
    run = state.runs.get(key)
    if run is not None:
        run.reopened_by, run.reopened_at, run.timed_out_at = None, event.at, None
        time_run(state, run)  # its dagrun_timeout counts from now
    backfill = state.backfills.get(event.request_id)
    if backfill is not None and run is not None:
        _backfill_took(backfill, key, run.logical_date)


def backfill_planned(state: SchedulerState, event: BackfillPlanned) -> None:
    request = state.backfill_requests.pop(event.backfill_id, None)
    remember_request(state, event.backfill_id)
    conf = request.conf_json if request is not None else "{}"
    state.backfills[event.backfill_id] = Backfill(event.dag_id, list(event.logical_dates), event.reprocess_failed,
                                                  conf)


def backfill_finished(state: SchedulerState, event: BackfillFinished) -> None:
    state.backfills.pop(event.backfill_id, None)


def backfill_run_created(state: SchedulerState, dag_id: str, key: tuple[str, str], logical_date: float) -> None:
    """A backfill run was created: the first backfill of the DAG still waiting for that date takes it."""
    for backfill in state.backfills.values():
        if backfill.dag_id == dag_id and logical_date in backfill.dates:
            _backfill_took(backfill, key, logical_date)
            return


# -- helpers ----------------------------------------------------------------------------------

def find_run(state: SchedulerState, dag_id: str, run_id: str) -> DagRun | None:
    """An open or finished run."""
    key = (dag_id, run_id)
    return state.runs.get(key) or state.finished.get(key)


def reopen(state: SchedulerState, run: DagRun, request_id: str) -> None:
    """A finished run runs again (DagRunReopened is decided for it)."""
    key = (run.dag_id, run.run_id)
    if state.finished.pop(key, None) is not None:
        run.finished_state, run.reopened_by = "", request_id
        state.runs[key] = run


def _backfill_took(backfill: Backfill, key: tuple[str, str], logical_date: float) -> None:
    if logical_date in backfill.dates:
        backfill.dates.remove(logical_date)
    backfill.runs.add(key)


def _seen(state: SchedulerState, request_id: str) -> bool:
    """Whether the request was applied before; marks it applied (a command without id is never deduped)."""
    if not request_id:
        return False
    if request_id in state.requests:
        return True
    remember_request(state, request_id)
    return False


def _reject(state: SchedulerState, dag_id: str, request_id: str, command: str, reason: str) -> None:
    if request_id:
        state.rejections[request_id] = Rejection(dag_id, command, reason)


def _target(state: SchedulerState, event: ClearTask | MarkTask, task_id: str) -> tuple[DagRun, DagEntry] | str:
    """The run (open or finished) and DAG a command changes, or why it cannot. A marker's clear names the
    run by its logical date."""
    if isinstance(event, ClearTask) and not event.run_id and event.logical_date is not None:
        found, dag = run_at(state, event.dag_id, event.logical_date), state.dags.get(event.dag_id)
        if found is None or dag is None:
            return f"DAG {event.dag_id} has no run at {logical_date_iso(event.logical_date)} to clear"
        return _task_problem(dag, task_id) or (found, dag)
    run, dag = find_run(state, event.dag_id, event.run_id), state.dags.get(event.dag_id)
    if run is None and was_forgotten(state, event.dag_id, event.run_id):
        return forgotten_reason(state, event.dag_id, event.run_id) + ": it can no longer be cleared or marked"
    if run is None:
        return f"DAG {event.dag_id} has no run {event.run_id}"
    if dag is None:
        return f"DAG {event.dag_id} is not defined (any more): its run cannot change"
    return _task_problem(dag, task_id) or (run, dag)


def commanded(run: DagRun, dag: DagEntry, task_id: str, map_index: int) -> list[TaskInstance]:
    """The instances a command of ``task_id`` changes: instance ``map_index`` of a mapped task, or (-1)
    every instance of an expanded mapped task, or the task's one instance (a mapped task's whole while
    it is not expanded)."""
    whole = run.tasks.get(task_id)
    if map_index >= 0:
        return [run.instance(task_id, map_index)]
    task = dag.tasks.get(task_id)
    if task is not None and task.mapped is not None and whole is not None and whole.map_count > 0:
        return [run.instance(task_id, index) for index in range(whole.map_count)]
    return [run.instance(task_id)]


def map_index_problem(run: DagRun, dag: DagEntry, task_id: str, map_index: int) -> str:
    """Why a command cannot name instance ``map_index`` of ``task_id`` ("" when it can, or names none)."""
    if map_index < 0:
        return ""
    task, whole = dag.tasks.get(task_id), run.tasks.get(task_id)
    if task is None or task.mapped is None:
        return f"task {task_id} is not mapped: it has no map index {map_index}"
    count = whole.map_count if whole is not None else -1
    if not 0 <= map_index < count:
        return f"mapped task {task_id} has no map index {map_index} in run {run.run_id} (" + \
            ("not expanded yet" if count < 0 else f"it has {count}") + ")"
    return ""


def _task_problem(dag: DagEntry, task_id: str) -> str:
    return "" if not task_id or task_id in dag.tasks else f"DAG {dag.definition.dag_id} has no task {task_id}"


def _clear_targets(dag: DagEntry, event: ClearTask) -> list[str]:
    if not event.task_id:
        return list(dag.order)
    targets = [event.task_id]
    targets += downstream_of(dag, event.task_id) if event.downstream else []
    targets += upstream_of(dag, event.task_id) if event.upstream else []
    return list(dict.fromkeys(targets))


def _current_try(state: SchedulerState,
                 event: TaskKillRequested | TaskKilled) -> tuple[DagRun, TaskInstance] | None:
    """The run and instance if ``event`` concerns the instance's current, still active try."""
    run = state.runs.get((event.dag_id, event.run_id))
    instance = run.tasks.get(instance_key(event.task_id, event.map_index)) if run else None
    if run is None or instance is None or instance.try_number != event.try_number or instance.state not in ACTIVE:
        return None
    return run, instance
