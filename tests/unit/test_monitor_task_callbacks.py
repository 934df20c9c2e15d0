"""Airflow's callbacks in the monitor's core (services/monitor/core/task_callbacks.py): given these
events, these calls are owed (trigger, task, try, state) — execute on the start, success, failure
only once no retry is left, retry, skipped only when the task raised the skip — DAG success and
failure; settled by CallbackCalled; the same after a snapshot restore."""

from __future__ import annotations

import copy

import pytest

from schemas import (
    CallbackCalled,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    ExternalTaskReported,
    TaskDeclaredDead,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskFailed,
    TaskQueued,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TaskUpstreamFailed,
    TimeSensorMet,
)
from services.monitor.core import due_notifications, fold
from services.monitor.core.snapshot import MonitorSnapshot, decode_snapshot, encode_snapshot

T0 = 1_000_200.0
RUN = "manual__r1"
TRIGGERS = ("success", "failure", "retry", "execute", "skipped")
IDS = {"dag_id": "etl", "run_id": RUN, "task_id": "a"}


def target(trigger: str) -> str:
    return f"/dags/etl.py:on_{trigger}"


def parsed(*, retries: int = 1, at: float = 0.0, task_triggers=TRIGGERS, dag_triggers=(), on_failure=None,
           params_json: str = "{}") -> DagParsed:
    task = TaskDefinition(task_id="a", kind="bash", command="true", retries=retries,
                          callbacks={trigger: [target(trigger)] for trigger in task_triggers})
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", tasks=[task], on_failure=on_failure,
                               callbacks={trigger: [f"/dags/etl.py:dag_{trigger}"] for trigger in dag_triggers},
                               params_json=params_json)
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint="fp", definition=definition, at=at)


def created(at: float = T0, conf_json: str = "{}") -> DagRunCreated:
    return DagRunCreated(dag_id="etl", run_id=RUN, logical_date=T0 - 3600, run_type="manual", conf_json=conf_json,
                         dag_fingerprint="fp", scheduler_id="s", at=at)


def queued(number: int = 1, at: float = T0 + 1) -> TaskQueued:
    return TaskQueued(**IDS, try_number=number, executor="local", queue="default", scheduler_id="s",
                      run_type="manual", logical_date=T0 - 3600, data_interval_start=T0 - 7200,
                      data_interval_end=T0 - 3600, conf_json='{"x": 1}', params_json='{"p": "v"}', at=at)


def started(number: int = 1, runner: str = "r1", at: float = T0 + 2) -> TaskStarted:
    return TaskStarted(**IDS, try_number=number, runner_id=runner, hostname="h", pid=1, at=at)


def succeeded(number: int = 1, runner: str = "r1", at: float = T0 + 3) -> TaskSucceeded:
    return TaskSucceeded(**IDS, try_number=number, runner_id=runner, at=at)


def failed(number: int = 1, runner: str = "r1", at: float = T0 + 3) -> TaskFailed:
    return TaskFailed(**IDS, try_number=number, runner_id=runner, error=f"ValueError: boom {number}", at=at)


def dead(number: int = 1, at: float = T0 + 30) -> TaskDeclaredDead:
    return TaskDeclaredDead(**IDS, try_number=number, reason="no heartbeat for 30 s", scheduler_id="s", at=at)


def retry(number: int = 1, at: float = T0 + 4) -> TaskRetryScheduled:
    return TaskRetryScheduled(**IDS, try_number=number, next_try_number=number + 1, not_before=at + 5, at=at)


def try_skipped(number: int = 1) -> TaskTrySkipped:
    return TaskTrySkipped(**IDS, try_number=number, runner_id="r1", reason="no new data", at=T0 + 3)


def finished(state: str, at: float = T0 + 50) -> DagRunFinished:
    return DagRunFinished(dag_id="etl", run_id=RUN, state=state, at=at)


def owed_of(events) -> list[tuple[str, str, int, str]]:
    return [(item.trigger, item.task_id, item.try_number, item.payload["state"])
            for item in due_notifications(fold(events).notifications)]


def called_back(notification) -> CallbackCalled:
    return CallbackCalled(dag_id=notification.dag_id, run_id=notification.run_id, trigger=notification.trigger,
                          task_id=notification.task_id, try_number=notification.try_number,
                          target=notification.target, attempts=1, ok=True, at=T0 + 60)


@pytest.mark.parametrize("events, expected", [
    ([parsed(), created(), queued()], []),
    ([parsed(), created(), queued(), started()], [("execute", "a", 1, "running")]),
    ([parsed(), created(), queued(), started(), succeeded()],
     [("execute", "a", 1, "running"), ("success", "a", 1, "success")]),
    # A failure with a retry left owes nothing until the retry is scheduled; then "retry".
    ([parsed(task_triggers=("failure", "retry")), created(), queued(), started(), failed()], []),
    ([parsed(task_triggers=("failure", "retry")), created(), queued(), started(), failed(), retry()],
     [("retry", "a", 1, "up_for_retry")]),
    # The last try the retries allow owes "failure".
    ([parsed(task_triggers=("failure", "retry")), created(), queued(), started(), failed(), retry(),
      queued(2), started(2), failed(2)], [("retry", "a", 1, "up_for_retry"), ("failure", "a", 2, "failed")]),
    ([parsed(retries=0, task_triggers=("failure", "retry")), created(), queued(), started(), failed()],
     [("failure", "a", 1, "failed")]),
    ([parsed(retries=0, task_triggers=("failure",)), created(), queued(), started(), dead()],
     [("failure", "a", 1, "failed")]),  # declared dead: failed too
    ([parsed(task_triggers=("skipped",)), created(), queued(), started(), try_skipped()],
     [("skipped", "a", 1, "skipped")]),
    # Never ran: skipped by its trigger rule or a branch, or upstream failed: no callback (as Airflow).
    ([parsed(), created(), TaskSkipped(**IDS, reason="branch", at=T0 + 3),
      TaskUpstreamFailed(**IDS, reason="upstream failed", at=T0 + 3)], []),
    ([parsed(task_triggers=("success",)), created(), TaskEmptySucceeded(**IDS, scheduler_id="s", at=T0 + 2)],
     [("success", "a", 0, "success")]),  # an EmptyOperator has no try
    # A deferred sensor ends with no try: a time sensor's moment, an external task sensor's answer.
    ([parsed(task_triggers=("success",)), created(), TimeSensorMet(**IDS, try_number=1, moment=T0, at=T0 + 2)],
     [("success", "a", 1, "success")]),
    ([parsed(task_triggers=("failure", "skipped")), created(),
      ExternalTaskReported(**IDS, try_number=1, wait_id="w", external_dag_id="up", outcome="failed",
                           reason="x of 'up' in failed states", states={"x": "failed"}, at=T0 + 2)],
     [("failure", "a", 1, "failed")]),
    # A trigger waiting for its run after its try: its try's success owed the callback, not the answer.
    ([parsed(task_triggers=("success",)), created(), queued(), started(), succeeded(),
      ExternalTaskReported(**IDS, try_number=1, wait_id="w", external_dag_id="up", outcome="success", reason="",
                           states={"": "success"}, at=T0 + 9)], [("success", "a", 1, "success")]),
    # Only the claimant's outcome counts; a second claim owes no second "execute".
    ([parsed(task_triggers=("execute", "success")), created(), queued(), started(), started(runner="r2"),
      succeeded(runner="r2")], [("execute", "a", 1, "running")]),
    ([parsed(task_triggers=("execute", "success")), created(), queued(), started(), started(runner="r2"),
      succeeded(runner="r2"), succeeded()], [("execute", "a", 1, "running"), ("success", "a", 1, "success")]),
    # A late outcome of a try declared dead, and of a try no longer current, owes nothing.
    ([parsed(retries=0, task_triggers=("success", "failure")), created(), queued(), started(), dead(),
      succeeded(at=T0 + 31)], [("failure", "a", 1, "failed")]),
    ([parsed(task_triggers=("failure", "retry")), created(), queued(), started(), dead(), retry(at=T0 + 30),
      queued(2, at=T0 + 40), failed(1, at=T0 + 41)], [("retry", "a", 1, "up_for_retry")]),
    # The run's end forgets its tries: what comes after owes nothing.
    ([parsed(task_triggers=("success",)), created(), queued(), started(), finished("failed"), succeeded(at=T0 + 51)],
     []),
    # Tries queued before the task declared callbacks, or events older than the definition: nothing.
    ([created(), queued(), parsed(at=T0 + 1.5), started()], []),
    ([parsed(at=T0 + 100), created(), queued(), started(), succeeded()], []),
    # The DAG's own: on_success_callback / on_failure_callback, and Tock's on_failure.
    ([parsed(task_triggers=(), dag_triggers=("success", "failure")), created(), finished("success")],
     [("success", "", 0, "success")]),
    ([parsed(task_triggers=(), dag_triggers=("success", "failure"), on_failure="http://hooks.example/x"), created(),
      finished("failed")], [("failure", "", 0, "failed"), ("failure", "", 0, "failed")]),
])
def test_callbacks_owed_for_events(events, expected):
    assert owed_of(events) == expected


def test_each_callable_of_a_trigger_is_owed_its_own_call_tocks_own_given_the_json_payload():
    events = [parsed(task_triggers=(), dag_triggers=("failure",), on_failure="http://hooks.example/x"), created(),
              finished("failed")]
    owed = due_notifications(fold(events).notifications)
    assert [(item.target, item.context) for item in owed] == [("http://hooks.example/x", False),
                                                              ("/dags/etl.py:dag_failure", True)]


def test_a_task_callback_payload_is_the_context_the_log_holds():
    events = [parsed(retries=0, task_triggers=("failure",)), created(), queued(), started(), failed()]
    (owed,) = due_notifications(fold(events).notifications)
    assert (owed.target, owed.context, owed.key) == (target("failure"), True,
                                                     ("etl", RUN, "failure", "a", 1, target("failure")))
    assert owed.payload == {
        "dag_id": "etl", "run_id": RUN, "task_id": "a", "try_number": 1, "map_index": -1, "trigger": "failure",
        "at": T0 + 3, "state": "failed", "logical_date": T0 - 3600, "data_interval_start": T0 - 7200,
        "data_interval_end": T0 - 3600, "run_type": "manual", "conf": {"x": 1}, "params": {"p": "v"},
        "exception": "ValueError: boom 1"}


def test_a_retry_payload_carries_the_error_it_failed_with_a_skip_its_reason():
    (retried,) = due_notifications(fold([parsed(task_triggers=("retry",)), created(), queued(), started(), dead(),
                                         retry(at=T0 + 30)]).notifications)
    assert (retried.payload["exception"], retried.payload["try_number"]) == ("no heartbeat for 30 s", 1)
    (skipped,) = due_notifications(fold([parsed(task_triggers=("skipped",)), created(), queued(), started(),
                                         try_skipped()]).notifications)
    assert skipped.payload["reason"] == "no new data" and "exception" not in skipped.payload


def test_a_run_callback_payload_has_the_runs_conf_and_params():
    events = [parsed(task_triggers=(), dag_triggers=("success",),
                     params_json='[{"name": "p", "default": 1, "has_default": true, "schema": {}}]'),
              created(conf_json='{"q": 2}'), finished("success")]
    (owed,) = due_notifications(fold(events).notifications)
    assert owed.payload == {"dag_id": "etl", "run_id": RUN, "trigger": "success", "at": T0 + 50, "state": "success",
                            "reason": "", "logical_date": T0 - 3600, "run_type": "manual", "conf": {"q": 2},
                            "params": {"p": 1, "q": 2}}


def test_a_callback_called_is_settled_and_airflows_are_called_again_when_a_reopened_run_ends_again():
    first = [parsed(task_triggers=(), dag_triggers=("success",), on_failure="http://hooks.example/x"), created()]
    state = fold([*first, finished("success")])
    (success,) = due_notifications(state.notifications)
    fold([called_back(success), DagRunReopened(dag_id="etl", run_id=RUN, at=T0 + 70)], state)
    assert due_notifications(state.notifications) == []
    fold([finished("success", at=T0 + 80)], state)  # each transition, as Airflow calls them
    assert [item.trigger for item in due_notifications(state.notifications)] == ["success"]
    # Tock's own on_failure: once per run, even reopened.
    state = fold([*first, finished("failed")])
    (failure,) = due_notifications(state.notifications)
    fold([called_back(failure), DagRunReopened(dag_id="etl", run_id=RUN, at=T0 + 70), finished("failed", T0 + 80)],
         state)
    assert due_notifications(state.notifications) == []


def test_task_callbacks_called_are_settled_without_growing_the_settled_set():
    state = fold([parsed(), created(), queued(), started(), succeeded()])
    fold([called_back(item) for item in due_notifications(state.notifications)], state)
    assert due_notifications(state.notifications) == [] and state.notifications.settled == set()


HISTORY = [parsed(task_triggers=("execute", "failure", "retry"), dag_triggers=("failure",)), created(), queued(),
           started(), failed(), retry(), queued(2, at=T0 + 10), started(2, at=T0 + 11), failed(2, at=T0 + 12),
           finished("failed")]


@pytest.mark.parametrize("cut", range(len(HISTORY) + 1))
def test_restoring_a_snapshot_anywhere_and_folding_the_rest_owes_the_same_calls(cut):
    head = fold(HISTORY[:cut])
    restored = decode_snapshot(encode_snapshot(MonitorSnapshot(0, head, {"dags": 1, "events": cut}))).state
    assert restored == head
    whole = fold(HISTORY)
    assert fold(HISTORY[cut:], restored).notifications == whole.notifications
    assert [(item.trigger, item.try_number) for item in due_notifications(whole.notifications)] == [
        ("execute", 1), ("retry", 1), ("execute", 2), ("failure", 2), ("failure", 0)]


def test_folding_the_callbacks_called_read_back_twice_changes_nothing():
    state = fold(HISTORY)
    calls = [called_back(item) for item in due_notifications(state.notifications)]
    fold(calls, state)
    once = copy.deepcopy(state.notifications)
    fold(calls, state)
    assert state.notifications == once and due_notifications(state.notifications) == []
