"""Dead means stopped (issue 20, defect 7), as pure rules: the runner that won a try obeys a later
TaskDeclaredDead of it as it obeys a TaskKillRequested; after a TaskDeclaredDead (or kill request)
commits, the scheduler stops the try's handle where its executor can stop it."""

from __future__ import annotations

from schemas import TaskDeclaredDead, TaskKillRequested, TaskStarted
from services.runner.core.claim import kill_requests, winners
from services.scheduler.core.stops import Stop, handle_to_stop
from tests.unit.scheduler_fixtures import created, launched, parsed, queued, started, state_of

A, A2, B = ("d", "r", "a", 1), ("d", "r", "a", 2), ("d", "r", "b", 1)


def runner_started(key, runner_id: str = "me") -> TaskStarted:
    dag_id, run_id, task_id, try_number = key
    return TaskStarted(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname="h", pid=1, at=0.0)


def declared_dead(key, reason: str = "no heartbeat for 60 s") -> TaskDeclaredDead:
    dag_id, run_id, task_id, try_number = key
    return TaskDeclaredDead(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number,
                            last_heartbeat_at=None, reason=reason, scheduler_id="s1", at=0.0)


def kill_requested(key, reason: str) -> TaskKillRequested:
    dag_id, run_id, task_id, try_number = key
    return TaskKillRequested(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, reason=reason,
                             scheduler_id="s1", at=0.0)


def test_a_won_try_declared_dead_afterwards_is_one_its_runner_stops():
    log = [runner_started(A), declared_dead(A)]
    assert winners(log, {A: "me"}).won == {A}
    assert kill_requests(log, {A}) == {A: "declared dead by the scheduler (no heartbeat for 60 s)"}


def test_only_the_first_stop_counts_and_only_for_the_tries_asked_about():
    log = [runner_started(A), runner_started(B, "me-b"), declared_dead(A2), kill_requested(A, "cleared"),
           declared_dead(A), declared_dead(B)]
    assert kill_requests(log, {A}) == {A: "cleared"}
    assert kill_requests(log, {B}) == {B: "declared dead by the scheduler (no heartbeat for 60 s)"}
    assert kill_requests(log, {A2}) == {A2: "declared dead by the scheduler (no heartbeat for 60 s)"}


# -- the scheduler's side: which handle a committed kill request or death stops --------------------

def _folded(*events):
    return state_of(parsed(edges={"a": []}, retries=1), created(), queued("a", executor="celery"),
                    launched("a", handle="celery-task-id"), started("a"), *events)


def _death(try_number: int = 1) -> TaskDeclaredDead:
    return TaskDeclaredDead(dag_id="etl", run_id="manual__r1", task_id="a", try_number=try_number,
                            reason="no heartbeat for 60 s", scheduler_id="s1", at=9.0)


def test_a_committed_death_stops_the_dead_try_s_handle_at_once():
    death = _death()
    assert handle_to_stop(_folded(death), death, {"celery"}) == Stop("celery", "celery-task-id", at_once=True)


def test_a_committed_kill_request_stops_the_handle_with_grace():
    kill = TaskKillRequested(dag_id="etl", run_id="manual__r1", task_id="a", try_number=1, reason="killed",
                             scheduler_id="s1", at=9.0)
    assert handle_to_stop(_folded(kill), kill, {"celery"}) == Stop("celery", "celery-task-id", at_once=False)


def test_nothing_is_stopped_for_another_try_an_executor_that_cannot_stop_or_a_try_without_a_handle():
    assert handle_to_stop(_folded(_death()), _death(2), {"celery"}) is None
    assert handle_to_stop(_folded(_death()), _death(), {"kubernetes"}) is None
    unlaunched = state_of(parsed(edges={"a": []}), created(), queued("a", executor="celery"))
    assert handle_to_stop(unlaunched, _death(), {"celery"}) is None
