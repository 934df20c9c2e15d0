"""Airflow's callbacks, from the log: which events of a run or of a try owe which calls.

Of a task that declares callbacks (``on_*_callback``), in its DAG's current definition:

* the first TaskStarted of its current try owes "execute" (state "running"): Airflow calls it in
  the worker right before the task runs; here it is called once the start is in the log;
* its TaskSucceeded owes "success" (and an EmptyOperator's TaskEmptySucceeded, which has no try);
* its TaskFailed or TaskDeclaredDead owes "failure" if no retry is left (try_number > retries,
  the scheduler's rule); else its TaskRetryScheduled owes "retry" (state "up_for_retry");
* its TaskTrySkipped (the task raised AirflowSkipException) owes "skipped". A task the scheduler
  skips (trigger rule, branch) or gives up on (upstream failed) never ran: no callback, as in Airflow.

Only tries whose TaskQueued was folded while the task declared callbacks owe calls, and outcomes
that change nothing (another runner's, a try no longer current or ended already) owe none.
A run's DagRunFinished owes its DAG's "success" or "failure" (``on_success_callback`` /
``on_failure_callback``, and Tock's ``on_failure``). Each payload is the JSON of a context:
ids, try number, state, dates (seconds), run type, conf, params and the error or reason.
"""

from __future__ import annotations

import json
from typing import TypeAlias

from schemas import (
    DagDefinition,
    DagRunCreated,
    DagRunFinished,
    ExternalTaskReported,
    SensorTimedOut,
    TaskDeclaredDead,
    TaskEmptySucceeded,
    TaskFailed,
    TaskQueued,
    TaskRescheduled,
    TaskRetryScheduled,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TimeSensorMet,
)
from schemas import params as param_rules
from services.monitor.core.notify import (
    DEADLINE_MISSED,
    EXECUTE,
    FAILURE,
    RETRY,
    SKIPPED,
    SUCCESS,
    Callback,
    DagCallbacks,
    Notification,
    NotificationBook,
    RunContext,
    TryContext,
)

TryOutcome: TypeAlias = (TaskStarted | TaskSucceeded | TaskFailed | TaskDeclaredDead | TaskTrySkipped | TaskRescheduled
                         | SensorTimedOut)
"""Events of one try that may owe one of its task's callbacks (its start, or its outcome)."""
TaskCallbackEvent: TypeAlias = (TryOutcome | TaskRetryScheduled | TaskEmptySucceeded | ExternalTaskReported
                                | TimeSensorMet)
"""Events of a task instance that may owe one of its callbacks."""


def dag_callbacks(definition: DagDefinition, since: float) -> DagCallbacks:
    """What a DAG definition declares: its own callbacks by trigger (Tock's first, given the JSON
    payload; then Airflow's, given a context) and its tasks' (with their retries)."""
    run: dict[str, list[Callback]] = {}
    for trigger, target in ((FAILURE, definition.on_failure), (DEADLINE_MISSED, definition.on_deadline_missed)):
        if target:
            run[trigger] = [Callback(target)]
    for trigger, targets in definition.callbacks.items():
        run.setdefault(trigger, []).extend(Callback(target, context=True) for target in targets)
    tasks = [task for task in definition.tasks if task.callbacks]
    return DagCallbacks(since, run, {task.task_id: task.callbacks for task in tasks},
                        {task.task_id: task.retries for task in tasks}, definition.params_json)


def run_created(book: NotificationBook, event: DagRunCreated) -> None:
    if event.dag_id in book.dags:
        book.runs[(event.dag_id, event.run_id)] = RunContext(event.logical_date, event.run_type, event.conf_json)


def run_finished(book: NotificationBook, event: DagRunFinished) -> None:
    """The run's own callbacks for its outcome; then its contexts are forgotten."""
    if event.dag_id in book.dags:
        trigger = FAILURE if event.state == "failed" else SUCCESS
        details = {"state": event.state, "reason": event.reason, **_run_details(book, event.dag_id, event.run_id)}
        book.triggered(event.dag_id, event.run_id, trigger, event.at, details)
    book.runs.pop((event.dag_id, event.run_id), None)
    for key in [key for key in book.tries if key[1] == event.run_id and key[0] == event.dag_id]:
        del book.tries[key]  # only tasks that declare callbacks have one: few


def try_queued(book: NotificationBook, event: TaskQueued) -> None:
    """A new try: remembered (with what its context holds) if its task declares callbacks."""
    callbacks = book.dags.get(event.dag_id)
    if callbacks is None:
        return
    book.runs.setdefault((event.dag_id, event.run_id),
                         RunContext(event.logical_date, event.run_type, event.conf_json))  # a reopened run's
    if event.task_id in callbacks.tasks:
        key = (event.dag_id, event.run_id, event.task_id)
        before = book.tries.get(key)
        book.tries[key] = TryContext(
            event.try_number, event.logical_date, event.data_interval_start, event.data_interval_end,
            event.run_type, event.conf_json, event.params_json, pokes=before.pokes if before is not None else 0)


def try_started(book: NotificationBook, event: TaskStarted) -> None:
    current = _current(book, event)
    if current is not None and not current.runner_id:  # the first claim is the one that runs
        current.runner_id = event.runner_id
        _owe(book, event, current, EXECUTE, "running", {})


def try_ended(book: NotificationBook, event: TaskSucceeded | TaskFailed | TaskTrySkipped) -> None:
    """A try's outcome, from its runner."""
    if event.dag_id not in book.dags:
        return  # most DAGs declare no callbacks: the common case costs one lookup
    match event:
        case TaskSucceeded():
            try_succeeded(book, event)
        case TaskFailed():
            try_failed(book, event)
        case TaskTrySkipped():
            try_skipped(book, event)


def try_succeeded(book: NotificationBook, event: TaskSucceeded) -> None:
    current = _ended(book, event, event.runner_id)
    if current is not None:
        _owe(book, event, current, SUCCESS, "success", {})


def try_failed(book: NotificationBook, event: TaskFailed) -> None:
    current = _ended(book, event, event.runner_id)
    if current is not None:
        _failed(book, event, current, event.error)


def declared_dead(book: NotificationBook, event: TaskDeclaredDead) -> None:
    current = _ended(book, event, "")
    if current is not None:
        _failed(book, event, current, event.reason)


def retry_scheduled(book: NotificationBook, event: TaskRetryScheduled) -> None:
    current = book.tries.get((event.dag_id, event.run_id, event.task_id)) if event.dag_id in book.dags else None
    if current is not None and current.try_number == event.try_number and current.ended and not current.retried:
        current.retried = True
        _owe(book, event, current, RETRY, "up_for_retry", {"exception": current.error})


def try_skipped(book: NotificationBook, event: TaskTrySkipped) -> None:
    current = _ended(book, event, event.runner_id)
    if current is not None:
        _owe(book, event, current, SKIPPED, "skipped", {"reason": event.reason})


def rescheduled(book: NotificationBook, event: TaskRescheduled) -> None:
    """A sensor's poke was not met: its next try is a poke too, not a retry."""
    current = _current(book, event)
    if current is not None:
        current.pokes += 1


def sensor_timed_out(book: NotificationBook, event: SensorTimedOut) -> None:
    """A sensor waited its timeout: "failure" (it is not retried), or "skipped" with soft_fail."""
    current = _ended(book, event, "")
    if current is None:
        return
    reason = f"the sensor timed out after {event.waited:.0f} s (timeout {event.timeout:g} s)"
    if event.state == "skipped":
        _owe(book, event, current, SKIPPED, "skipped", {"reason": reason})
    else:
        current.error = reason
        _owe(book, event, current, FAILURE, "failed", {"exception": reason})


def empty_succeeded(book: NotificationBook, event: TaskEmptySucceeded) -> None:
    """An EmptyOperator succeeded without a try (try_number 0): its context is its run's."""
    if event.dag_id not in book.dags:
        return
    run = book.runs.get((event.dag_id, event.run_id)) or RunContext(None, "", "{}")
    _owe(book, event, TryContext(0, run.logical_date, run_type=run.run_type, conf_json=run.conf_json),
         SUCCESS, "success", {})


def deferral_ended(book: NotificationBook, event: ExternalTaskReported | TimeSensorMet) -> None:
    """A deferred sensor (no try ran: an external task sensor answered, a time sensor's moment come) ended:
    its context is its run's. A TriggerDagRunOperator's wait after its try is not one: its try's own
    success already called its callbacks."""
    if event.dag_id not in book.dags:
        return
    known = book.tries.get((event.dag_id, event.run_id, event.task_id))
    if known is not None and known.try_number == event.try_number:
        return  # a try of it was queued: its outcome was the try's
    run = book.runs.get((event.dag_id, event.run_id)) or RunContext(None, "", "{}")
    context = TryContext(event.try_number, run.logical_date, run_type=run.run_type, conf_json=run.conf_json)
    outcome = event.outcome if isinstance(event, ExternalTaskReported) else "success"
    reason = event.reason if isinstance(event, ExternalTaskReported) else ""
    if outcome == "failed":
        context.error = reason
        _owe(book, event, context, FAILURE, "failed", {"exception": reason})
    else:
        _owe(book, event, context, SKIPPED if outcome == "skipped" else SUCCESS, outcome,
             {"reason": reason} if outcome == "skipped" else {})


def _current(book: NotificationBook, event: TryOutcome) -> TryContext | None:
    """The context of the try ``event`` names if it is the task instance's current try, not ended."""
    if event.dag_id not in book.dags:
        return None
    current = book.tries.get((event.dag_id, event.run_id, event.task_id))
    if current is None or current.ended or current.try_number != event.try_number:
        return None
    return current


def _ended(book: NotificationBook, event: TryOutcome, runner_id: str) -> TryContext | None:
    """The current try, now ended by ``event``, if it counts (a runner other than the claimant's: not)."""
    current = _current(book, event)
    if current is None or (runner_id and current.runner_id and runner_id != current.runner_id):
        return None
    current.ended = True
    return current


def _failed(book: NotificationBook, event: TaskFailed | TaskDeclaredDead, current: TryContext, error: str) -> None:
    """A failed try owes "failure" when it was the last one its task's retries allow (else a retry comes)."""
    current.error = error
    if event.try_number - current.pokes > book.dags[event.dag_id].retries.get(event.task_id, 0):
        _owe(book, event, current, FAILURE, "failed", {"exception": error})


def _owe(book: NotificationBook, event: TaskCallbackEvent, current: TryContext, trigger: str, state: str,
         details: dict[str, object]) -> None:
    callbacks = book.dags.get(event.dag_id)
    targets = callbacks.tasks.get(event.task_id, {}).get(trigger, []) if callbacks is not None else []
    if callbacks is None or not targets or event.at < callbacks.since:
        return
    payload = {"dag_id": event.dag_id, "run_id": event.run_id, "task_id": event.task_id,
               "try_number": current.try_number, "map_index": -1, "trigger": trigger, "at": event.at,
               "state": state, "logical_date": current.logical_date,
               "data_interval_start": current.data_interval_start, "data_interval_end": current.data_interval_end,
               "run_type": current.run_type, "conf": _json_object(current.conf_json),
               "params": _json_object(current.params_json), **details}
    for target in targets:
        book.owe(Notification(event.dag_id, event.run_id, trigger, target, payload, event.task_id,
                              current.try_number, context=True))


def _run_details(book: NotificationBook, dag_id: str, run_id: str) -> dict[str, object]:
    """What a run's callbacks are told of it besides its outcome (nothing if its start was not seen)."""
    run = book.runs.get((dag_id, run_id))
    if run is None:
        return {}
    params = param_rules.for_task(book.dags[dag_id].params_json, "{}", run.conf_json)
    return {"logical_date": run.logical_date, "run_type": run.run_type, "conf": _json_object(run.conf_json),
            "params": params}


def _json_object(text: str) -> dict[str, object]:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
