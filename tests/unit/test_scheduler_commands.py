"""Operators' commands on every run state: given these events, when the owner decides until there
is nothing left to decide (its decisions folded as the shell commits them), then these events."""

from __future__ import annotations

import pytest

from schemas import (
    CancelBackfill,
    ClearTask,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    TaskFailed,
    TaskKilled,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from services.scheduler.core import DagTombstone, decide, evolve, manual_run_id
from tests.unit.scheduler_fixtures import (
    POLICY,
    RUN,
    created,
    failed,
    launched,
    parsed,
    queued,
    ran,
    started,
    state_of,
    succeeded,
)

CHAIN = {"a": [], "b": ["a"], "c": ["b"]}
HOURLY = parsed(schedule="0 * * * *", max_active_runs=2, start_date=1e9)  # no scheduled run due yet


def failed_in(run_id: str) -> TaskFailed:
    return TaskFailed(dag_id="etl", run_id=run_id, task_id="a", try_number=1, runner_id="r", error="boom", at=4.0)


def settle(state, now: float = 10.0) -> list[str]:
    """Decide and fold until nothing is left to decide; the decisions, named."""
    decided = []
    for _ in range(50):
        events = decide(state, now, POLICY)
        if not events:
            return decided
        for event in events:
            evolve(state, event)
        decided += [f"{type(event).__name__}:{getattr(event, 'task_id', '')}".rstrip(":") for event in events]
    raise AssertionError(f"decisions never settled: {decided[-20:]}")


def clear(task_id="a", request_id="c1", **flags) -> ClearTask:
    return ClearTask(dag_id="etl", run_id=RUN, task_id=task_id, request_id=request_id, at=9.0, **flags)


def mark(task_id="a", state="success", request_id="m1") -> MarkTask:
    return MarkTask(dag_id="etl", run_id=RUN, task_id=task_id, state=state, request_id=request_id, at=9.0)


def kill(task_id="a", request_id="k1") -> KillTask:
    return KillTask(dag_id="etl", run_id=RUN, task_id=task_id, request_id=request_id, at=9.0)


def killed(task_id="a", try_number=1) -> TaskKilled:
    return TaskKilled(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id="r", at=9.5)


def failed_run():
    """a failed (retries=0), b upstream_failed, the run finished failed."""
    state = state_of(parsed(edges={"a": [], "b": ["a"]}), created(), queued("a"), started("a"), failed("a"))
    assert settle(state) == ["TaskUpstreamFailed:b", "DagRunFinished"]
    return state


def running_a():
    return state_of(parsed(edges={"a": [], "b": ["a"]}), created(), queued("a"), launched("a"), started("a"))


class TestClear:
    def test_clear_of_a_failed_task_in_a_failed_run_reopens_it_and_reruns(self):
        state = failed_run()
        evolve(state, clear())
        assert settle(state) == ["DagRunReopened", "TaskCleared:a", "TaskQueued:a"]
        assert state.runs[("etl", RUN)].tasks["a"].try_number == 2
        for event in ran("a", try_number=2):
            evolve(state, event)
        assert settle(state) == ["TaskQueued:b"]

    def test_the_same_request_repeated_after_the_run_finished_changes_nothing(self):
        state = failed_run()
        evolve(state, clear())
        settle(state)
        for event in [*ran("a", try_number=2), *ran("b")]:
            evolve(state, event)
        assert settle(state) == ["DagRunFinished"]
        evolve(state, clear())
        assert settle(state) == []

    def test_clear_downstream_resets_the_tasks_after_it(self):
        state = state_of(parsed(edges=CHAIN), created(), *ran("a"), *ran("b"), *ran("c"))
        assert settle(state) == ["DagRunFinished"]
        evolve(state, clear("b", downstream=True))
        assert settle(state) == ["DagRunReopened", "TaskCleared:b", "TaskQueued:b", "TaskCleared:c"]

    def test_clear_of_the_whole_run(self):
        state = state_of(parsed(edges=CHAIN), created(), *ran("a"), *ran("b"), *ran("c"))
        settle(state)
        evolve(state, clear(""))
        assert settle(state) == ["DagRunReopened", "TaskCleared:a", "TaskQueued:a", "TaskCleared:b", "TaskCleared:c"]

    def test_clear_of_a_running_try_stops_it_first_then_reruns(self):
        state = running_a()
        evolve(state, clear())
        assert settle(state) == ["TaskKillRequested:a"]
        evolve(state, killed())
        assert settle(state) == ["TaskCleared:a", "TaskQueued:a"]

    def test_clear_of_a_queued_try_no_runner_claimed_needs_no_runner(self):
        state = state_of(parsed(), created(), queued("a"))
        evolve(state, clear())
        assert settle(state) == ["TaskKillRequested:a", "TaskCleared:a", "TaskQueued:a"]

    def test_a_late_success_of_the_stopped_try_does_not_undo_the_clear(self):
        state = running_a()
        evolve(state, clear())
        settle(state)
        evolve(state, succeeded("a"))  # it finished before it could be killed
        assert settle(state) == ["TaskCleared:a", "TaskQueued:a"]

    @pytest.mark.parametrize(("command", "reason"), [
        (ClearTask(dag_id="etl", run_id="nope", task_id="a", request_id="x", at=9.0), "has no run nope"),
        (ClearTask(dag_id="etl", run_id=RUN, task_id="zz", request_id="x", at=9.0), "has no task zz"),
        (MarkTask(dag_id="etl", run_id=RUN, task_id="a", state="running", request_id="x", at=9.0), "cannot mark"),
        (KillTask(dag_id="etl", run_id=RUN, task_id="b", request_id="x", at=9.0), "no running or queued try"),
    ])
    def test_impossible_commands_are_recorded_as_rejected_once(self, command, reason):
        state = running_a()
        evolve(state, command)
        [rejected] = [event for event in decide(state, 10.0, POLICY) if type(event).__name__ == "CommandRejected"]
        assert reason in rejected.reason and rejected.request_id == "x"
        evolve(state, rejected)
        evolve(state, command)
        assert [event for event in decide(state, 10.0, POLICY) if type(event).__name__ == "CommandRejected"] == []


class TestMark:
    def test_mark_success_of_a_running_try_stops_it_before_downstream_runs(self):
        state = running_a()
        evolve(state, mark())
        assert settle(state) == ["TaskKillRequested:a"]
        evolve(state, killed())
        assert settle(state) == ["TaskQueued:b"]
        assert state.runs[("etl", RUN)].tasks["a"].state == "success"

    def test_mark_failed_of_a_running_try_is_not_retried_and_fails_the_run(self):
        state = state_of(parsed(retries=3), created(), queued("a"), launched("a"), started("a"))
        evolve(state, mark(state="failed"))
        settle(state)
        evolve(state, TaskKilled(dag_id="etl", run_id=RUN, task_id="a", try_number=1, runner_id="r", at=9.5))
        assert settle(state) == ["DagRunFinished"]

    def test_mark_success_in_a_failed_run_lets_downstream_run(self):
        state = failed_run()
        evolve(state, mark())
        assert settle(state) == ["DagRunReopened", "TaskQueued:b"]

    def test_mark_skipped_skips_downstream_and_the_run_succeeds(self):
        state = state_of(parsed(edges={"a": [], "b": ["a"]}), created())
        evolve(state, mark(state="skipped"))
        assert settle(state) == ["TaskSkipped:b", "DagRunFinished"]
        assert state.finished[("etl", RUN)].finished_state == "success"

    def test_mark_of_a_task_not_yet_queued_takes_effect_at_once(self):
        state = state_of(parsed(edges={"a": [], "b": ["a"]}), created())
        evolve(state, mark("a", "success"))
        assert settle(state) == ["TaskQueued:b"]


    def test_a_clear_read_between_a_mark_and_the_marks_decisions_is_carried_out_on_replay(self):
        # The log's order when the clear is appended after the mark was read and before the owner
        # committed what the mark decided, and the owner died before deciding on the clear.
        state = state_of(parsed(edges={"a": [], "b": ["a"]}), created(), queued("a"), started("a"), succeeded("a"))
        settle(state)
        for event in (queued("b"), started("b"), succeeded("b")):
            evolve(state, event)
        assert settle(state) == ["DagRunFinished"]
        evolve(state, mark(state="failed"))
        decided = decide(state, 10.0, POLICY)
        assert [type(event).__name__ for event in decided] == ["DagRunReopened", "DagRunFinished"]
        evolve(state, clear(downstream=True))
        for event in decided:
            evolve(state, event)
        assert settle(state) == ["DagRunReopened", "TaskCleared:a", "TaskQueued:a", "TaskCleared:b"]


class TestKill:
    def test_kill_stops_the_try_which_ends_failed_not_retried(self):
        state = state_of(parsed(retries=2), created(), queued("a"), launched("a"), started("a"))
        evolve(state, kill())
        assert settle(state) == ["TaskKillRequested:a"]
        evolve(state, killed())
        assert settle(state) == ["DagRunFinished"]
        assert state.finished[("etl", RUN)].finished_state == "failed"

    def test_a_kill_repeated_with_its_request_id_acts_once(self):
        state = running_a()
        evolve(state, kill())
        settle(state)
        evolve(state, killed())
        settle(state)
        evolve(state, kill())
        assert settle(state) == []


class TestPause:
    def test_a_paused_dag_starts_no_task_of_an_open_run_until_unpaused(self):
        state = state_of(parsed(edges={"a": [], "b": ["a"]}), created(), queued("a"),
                         PauseDag(dag_id="etl", paused=True, at=2.5))
        evolve(state, started("a"))
        evolve(state, succeeded("a"))
        assert settle(state) == []
        evolve(state, PauseDag(dag_id="etl", paused=False, at=9.0))
        assert settle(state) == ["TaskQueued:b"]

    def test_a_manual_run_of_a_paused_dag_is_created_but_starts_nothing(self):
        state = state_of(parsed(), PauseDag(dag_id="etl", paused=True, at=0.5),
                         TriggerDagRun(dag_id="etl", request_id="r1", at=1.0))
        assert settle(state) == ["DagRunCreated"]


class TestTrigger:
    def test_a_trigger_repeated_after_its_run_finished_creates_nothing(self):
        trigger = TriggerDagRun(dag_id="etl", request_id="r1", at=1.0)
        state = state_of(parsed(), trigger)
        assert settle(state) == ["DagRunCreated", "TaskQueued:a"]
        for event in ran("a"):
            evolve(state, event)
        assert settle(state) == ["DagRunFinished"]
        evolve(state, trigger)
        assert settle(state) == []

    def test_pending_triggers_of_two_dags_with_the_same_request_id_do_not_collide(self):
        state = state_of(parsed("etl"), parsed("other"), TriggerDagRun(dag_id="etl", request_id="same", at=1.0),
                         TriggerDagRun(dag_id="other", request_id="same", at=1.0))
        created_runs = [event for event in decide(state, 2.0, POLICY) if type(event).__name__ == "DagRunCreated"]
        assert sorted(event.dag_id for event in created_runs) == ["etl", "other"]
        assert {event.run_id for event in created_runs} == {manual_run_id("same")}


class TestDeletedDags:
    def test_a_deleted_dag_ends_its_open_runs_with_the_reason_and_never_spins(self):
        state = state_of(parsed(edges={"a": [], "b": ["a"]}), created(), *ran("a"), DagTombstone("etl"))
        assert settle(state) == ["TaskRemoved:b", "DagRunFinished"]
        finished = state.finished[("etl", RUN)]
        assert finished.finished_state == "failed" and finished.tasks["b"].state == "removed"
        assert decide(state, 1000.0, POLICY) == []

    def test_a_deleted_dags_running_try_is_stopped_first(self):
        state = state_of(parsed(), created(), queued("a"), launched("a"), started("a"), DagTombstone("etl"))
        assert settle(state) == ["TaskKillRequested:a"]
        evolve(state, killed())
        assert settle(state) == ["TaskRemoved:a", "DagRunFinished"]

    def test_a_task_removed_from_the_dag_is_removed_and_the_run_goes_on(self):
        state = state_of(parsed(edges={"a": [], "b": []}), created(), queued("a"), queued("b"), started("b"),
                         *ran("a")[1:])
        evolve(state, parsed(edges={"a": []}))
        assert settle(state) == ["TaskKillRequested:b"]
        evolve(state, killed("b"))
        assert settle(state) == ["TaskRemoved:b", "DagRunFinished"]
        assert state.finished[("etl", RUN)].finished_state == "success"


class TestBackfill:
    def backfill(self, start=0.0, end=4 * 3600.0, request_id="bf1", reprocess_failed=False):
        return RequestBackfill(dag_id="etl", request_id=request_id, start_date=start, end_date=end,
                               reprocess_failed=reprocess_failed, at=1.0)

    def test_runs_of_every_interval_within_max_active_runs_then_finished(self):
        state = state_of(HOURLY, self.backfill())
        decided = settle(state, now=5.0)
        assert decided == ["BackfillPlanned", "DagRunCreated", "DagRunCreated", "TaskQueued:a", "TaskQueued:a"]
        most_open = len(state.runs)
        for _ in range(3):
            for run in list(state.runs.values()):
                for event in _ran(run.run_id):
                    evolve(state, event)
            settle(state, now=5.0)
            most_open = max(most_open, len(state.runs))
        assert most_open == 2 and not state.backfills and len(state.finished) == 5  # 0:00 .. 4:00
        assert all(run_id.startswith("backfill__") for _dag, run_id in state.finished)

    def test_reprocess_failed_reruns_failed_runs_and_leaves_the_others(self):
        state = state_of(HOURLY, self.backfill(end=3600.0))
        settle(state, now=5.0)
        first, second = sorted(state.runs)
        for event in _ran(first[1]):
            evolve(state, event)
        evolve(state, queued("a", run_id=second[1]))
        evolve(state, failed_in(second[1]))
        settle(state, now=5.0)
        evolve(state, self.backfill(end=3600.0, request_id="bf2", reprocess_failed=True))
        assert settle(state, now=6.0) == ["BackfillPlanned", "DagRunReopened", "TaskCleared:a", "TaskQueued:a"]
        assert list(state.runs) == [second]

    def test_cancel_creates_no_more_runs(self):
        state = state_of(parsed(schedule="0 * * * *", max_active_runs=1, start_date=1e9), self.backfill())
        settle(state, now=5.0)
        evolve(state, CancelBackfill(dag_id="etl", backfill_id="bf1", at=6.0))
        assert settle(state, now=7.0) == ["BackfillFinished"]
        assert len(state.runs) == 1

    def test_a_dag_without_a_schedule_is_rejected(self):
        state = state_of(parsed(), self.backfill())
        assert settle(state, now=5.0) == ["CommandRejected"]


def _ran(run_id: str) -> list:
    """Task "a" of run ``run_id`` queued, started and succeeded."""
    ids = {"dag_id": "etl", "run_id": run_id, "task_id": "a", "try_number": 1}
    return [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s", at=2.0),
            TaskStarted(**ids, runner_id="r", hostname="h", pid=1, at=3.0),
            TaskSucceeded(**ids, runner_id="r", at=4.0)]
