"""dagrun_timeout (issue 23): a run still running past its start plus the timeout fails, decided by its
owner as a timer in the log (DagRunTimedOut): its running tries are killed through the kill path, its
tasks not started are skipped, and it finishes failed naming the timeout once nothing of it runs.
Given these events, when deciding at this time, then these events."""

from __future__ import annotations

from schemas import ClearTask, DagRunFinished, DagRunTimedOut, PauseDag, TaskKilled, TaskRetryScheduled
from services.scheduler.core import decide, fold, next_wakeup
from services.scheduler.core.model import FAILED, SKIPPED, SUCCESS
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.limits_fixtures import dag, failed, queued, run, running, state_of, succeeded
from tests.unit.scheduler_fixtures import POLICY, names

CHAIN = {"a": [], "b": ["a"], "c": ["b"]}
TIMED = dag(CHAIN, dagrun_timeout=60.0)
REASON = "dagrun_timeout: the run ran longer than 60 s"


def test_before_its_deadline_the_run_goes_on():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"))
    assert decide(state, 59.9, POLICY) == []


def test_at_its_deadline_running_tries_are_killed_the_rest_skipped_and_the_run_waits_for_the_kill():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"))
    decided = decide(state, 60.0, POLICY)
    assert names(decided) == ["DagRunTimedOut", "TaskKillRequested:a", "TaskSkipped:b", "TaskSkipped:c"]
    timed_out, kill = decided[0], decided[1]
    assert (timed_out.started_at, timed_out.timeout, timed_out.at) == (0.0, 60.0, 60.0)
    assert kill.reason == REASON and decided[2].reason == REASON
    fold(state, decided)
    assert decide(state, 61.0, POLICY) == []  # killed once; the run waits for the try to end
    fold(state, [TaskKilled(dag_id="etl", run_id="r1", task_id="a", try_number=1, runner_id="r-r1-a-1", at=62.0)])
    assert decide(state, 63.0, POLICY) == [DagRunFinished(dag_id="etl", run_id="r1", state="failed", reason=REASON,
                                                          at=63.0)]


def test_with_nothing_running_it_fails_in_one_turn_and_what_ended_keeps_its_state():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), queued("r1", "a"), succeeded("r1", "a", at=5.0))
    decided = decide(state, 70.0, POLICY)
    assert names(decided) == ["DagRunTimedOut", "TaskSkipped:b", "TaskSkipped:c", "DagRunFinished"]
    fold(state, decided)
    finished = state.finished["etl", "r1"]
    assert finished.finished_state == "failed"
    assert {task_id: instance.state for task_id, instance in finished.tasks.items()} == {
        "a": SUCCESS, "b": SKIPPED, "c": SKIPPED}


def test_a_queued_try_no_runner_claimed_ends_with_its_kill_request_and_the_run_fails_at_once():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), queued("r1", "a"))
    decided = decide(state, 60.0, POLICY)
    assert names(decided) == ["DagRunTimedOut", "TaskKillRequested:a", "TaskSkipped:b", "TaskSkipped:c",
                              "DagRunFinished"]
    fold(state, decided)
    assert state.finished["etl", "r1"].tasks["a"].state == FAILED


def test_a_task_up_for_retry_is_skipped_and_its_retry_never_comes():
    timed = dag({"a": []}, dagrun_timeout=60.0, task_options={"a": {"retries": 2, "retry_delay": 100.0}})
    state = state_of(timed, run("r1", 100.0, at=0.0), queued("r1", "a"), failed("r1", "a", at=10.0))
    retry = decide(state, 11.0, POLICY)
    assert [type(event) for event in retry] == [TaskRetryScheduled]
    fold(state, retry)
    decided = decide(state, 60.0, POLICY)
    assert names(decided) == ["DagRunTimedOut", "TaskSkipped:a", "DagRunFinished"]
    fold(state, decided)
    assert not state.waiting and state.finished["etl", "r1"].tasks["a"].state == SKIPPED


def test_it_is_a_timer_an_untouched_run_is_walked_when_it_comes_due():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"))
    assert next_wakeup(state, 1_000.0, 10.0) == 60.0
    assert names(decide(state, 60.0, POLICY, touched=set()))[:2] == ["DagRunTimedOut", "TaskKillRequested:a"]


def test_a_takeover_folds_the_decision_and_carries_it_on_without_deciding_it_again():
    log = [TIMED, run("r1", 100.0, at=0.0), *running("r1", "a")]
    decided = decide(state_of(*log), 60.0, POLICY)
    new_owner = state_of(*log, *decided)  # replayed from the log by the partition's next owner
    assert decide(new_owner, 90.0, POLICY) == []
    fold(new_owner, [TaskKilled(dag_id="etl", run_id="r1", task_id="a", try_number=1, runner_id="r-r1-a-1",
                                at=91.0)])
    assert names(decide(new_owner, 92.0, POLICY)) == ["DagRunFinished"]


def test_a_snapshot_restores_the_runs_timer():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"))
    restored = decode_snapshot(encode_snapshot(Snapshot(0, state, {"dags": 1, "events": 4, "heartbeats": 0}))).state
    assert next_wakeup(restored, 1_000.0, 10.0) == 60.0
    assert decide(restored, 60.0, POLICY, touched=set()) == decide(state, 60.0, POLICY, touched=set())


def test_a_definition_with_a_shorter_timeout_moves_the_deadline():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"),
                     dag(CHAIN, dagrun_timeout=30.0, fingerprint="fp-30"))
    assert next_wakeup(state, 1_000.0, 10.0) == 30.0
    assert isinstance(decide(state, 30.0, POLICY, touched=set())[0], DagRunTimedOut)


def test_without_a_timeout_a_run_runs_as_long_as_it_takes():
    state = state_of(dag(CHAIN), run("r1", 100.0, at=0.0), *running("r1", "a"))
    assert decide(state, 10.0**9, POLICY) == [] and not state.timers.runs.heap


def test_a_paused_dags_runs_time_out_once_it_is_unpaused():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), *running("r1", "a"),
                     PauseDag(dag_id="etl", paused=True, at=1.0))
    assert decide(state, 70.0, POLICY) == []
    fold(state, [PauseDag(dag_id="etl", paused=False, at=80.0)])
    assert isinstance(decide(state, 81.0, POLICY)[0], DagRunTimedOut)


def test_a_cleared_run_runs_again_with_its_timeout_counted_from_its_reopening():
    state = state_of(TIMED, run("r1", 100.0, at=0.0), queued("r1", "a"), succeeded("r1", "a", at=5.0))
    fold(state, decide(state, 70.0, POLICY))
    fold(state, [ClearTask(dag_id="etl", run_id="r1", task_id="b", request_id="clear-1", at=100.0)])
    reopened = decide(state, 101.0, POLICY)
    assert names(reopened)[:2] == ["DagRunReopened", "TaskCleared:b"]
    fold(state, reopened)
    assert state.runs["etl", "r1"].timed_out_at is None
    assert next_wakeup(state, 1_000.0, 102.0) == 161.0
