"""Pods in the scheduler core: a pod that ended without an outcome from its runner fails its try
(with the pod's reason); a pod that ended after its runner's outcome changes nothing; the
watcher's repeated or stale observations are written once, for current tries only."""

from __future__ import annotations

from schemas import PodFinished, PodStarted, TaskFailed, TaskRetryScheduled
from services.scheduler.core import decide
from services.scheduler.core.pods import worth_writing
from tests.unit.scheduler_fixtures import POLICY, RUN, created, launched, parsed, queued, started, state_of, succeeded


def pod_finished(task_id: str = "a", try_number: int = 1, reason: str = "OOMKilled", exit_code: int | None = 137,
                 phase: str = "Failed", uid: str = "u1") -> PodFinished:
    return PodFinished(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, pod_name=f"tock-{task_id}",
                       phase=phase, reason=reason, exit_code=exit_code, pod_uid=uid, node="n1", at=7.0)


def pod_started(task_id: str = "a", try_number: int = 1, uid: str = "u1") -> PodStarted:
    return PodStarted(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, pod_name=f"tock-{task_id}",
                      pod_uid=uid, node="n1", at=5.0)


def running(retries: int = 1) -> list:
    return [parsed(retries=retries), created(), queued("a", executor="kubernetes"), launched("a"), started("a")]


def test_an_oom_killed_pod_fails_its_try_with_the_reason_then_it_is_retried():
    failure, retry = decide(state_of(*running(), pod_finished()), 8.0, POLICY)
    assert failure == TaskFailed(dag_id="etl", run_id=RUN, task_id="a", try_number=1, runner_id="r",
                                 error="pod tock-a ended Failed (OOMKilled, exit code 137) without an outcome "
                                       "from its runner", at=8.0)
    assert isinstance(retry, TaskRetryScheduled) and retry.next_try_number == 2


def test_a_pod_that_never_started_its_runner_fails_the_try_too():
    state = state_of(parsed(), created(), queued("a", executor="kubernetes"), launched("a"),
                     pod_finished(reason="ContainerCannotRun", exit_code=127))
    failure, finished = decide(state, 8.0, POLICY)
    assert isinstance(failure, TaskFailed) and "ContainerCannotRun, exit code 127" in failure.error
    assert (type(finished).__name__, finished.state) == ("DagRunFinished", "failed")


def test_a_pod_ending_after_its_runner_reported_changes_nothing():
    state = state_of(*running(), succeeded("a"), pod_finished(phase="Succeeded", reason="Completed", exit_code=0))
    assert [type(event).__name__ for event in decide(state, 8.0, POLICY)] == ["DagRunFinished"]


def test_the_watchers_observations_are_written_once_each_a_pods_end_whatever_became_of_its_try():
    state, written = state_of(*running()), set()
    assert worth_writing(state, [pod_started(), pod_finished()], written) == [pod_started(), pod_finished()]
    assert worth_writing(state, [pod_started(), pod_finished()], written) == []  # a relist repeats them
    assert worth_writing(state, [pod_started(try_number=2, uid="u2")], written) == []  # not the current try
    ended = state_of(*running(), succeeded("a"))
    assert worth_writing(ended, [pod_started(uid="u3"), pod_finished(uid="u3")], set()) == [pod_finished(uid="u3")]
