"""Retention of finished runs and request ids (core/retention.py): given these events, then this
state and these decisions. The memory a DAG's finished history costs is bounded; what is forgotten
is a function of the log alone, so replay, snapshot + tail and the live fold agree."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.settings import load_settings
from schemas import (
    ClearTask,
    DagRunCreated,
    DagRunFinished,
    KillTask,
    MarkTask,
    RequestBackfill,
    TaskFailed,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from services.scheduler.core import SchedulerState, decide, decide_runs, evolve, fold
from services.scheduler.core.forgotten import (
    DEFAULT_FINISHED_RUNS_KEPT,
    DEFAULT_REQUEST_IDS_KEPT,
    DateSet,
    RequestIds,
    Retention,
)
from services.scheduler.core.model import logical_date_iso, scheduled_run_id
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from services.scheduler.memory import PartitionMemory, retention_of
from tests.unit.scheduler_fixtures import POLICY, parsed
from tests.unit.test_scheduler_live_equals_replay import DAG as LIVE_DAG
from tests.unit.test_scheduler_live_equals_replay import World
from tock import DAG, DagDefinitionError

START = 1_700_006_400.0  # a whole minute (2023-11-15 00:00 UTC)
MINUTE = 60.0
CHAIN10 = {f"t{index}": [f"t{index - 1}"] if index else [] for index in range(10)}


def kept(runs: int = DEFAULT_FINISHED_RUNS_KEPT, requests: int = DEFAULT_REQUEST_IDS_KEPT) -> SchedulerState:
    return SchedulerState(retention=Retention(finished_runs_kept=runs, request_ids_kept=requests))


def encoded(state: SchedulerState) -> bytes:
    """The state as a snapshot record value."""
    return encode_snapshot(Snapshot(0, state, {}))


def restored(state: SchedulerState) -> SchedulerState:
    """Through a snapshot and back, with the same retention (the shell sets it from the settings)."""
    again = decode_snapshot(encoded(state)).state
    again.retention = state.retention
    return again


def scheduled_runs(count: int, tasks: int = 10, first: int = 0, failed: bool = False) -> list:
    """``count`` finished per-minute scheduled runs of etl, each a chain of ``tasks`` that ran once."""
    events: list = []
    for number in range(first, first + count):
        logical = START + number * MINUTE
        run_id = scheduled_run_id(logical_date_iso(logical))
        events.append(DagRunCreated(dag_id="etl", run_id=run_id, logical_date=logical, run_type="scheduled",
                                    dag_fingerprint="fp", scheduler_id="s", at=logical))
        for index in range(tasks):
            ids = {"dag_id": "etl", "run_id": run_id, "task_id": f"t{index}", "try_number": 1}
            events += [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s", at=logical),
                       TaskStarted(**ids, runner_id="r", hostname="h", pid=1, at=logical + 1)]
            end = TaskFailed(**ids, runner_id="r", error="boom", at=logical + 2) if failed and index == 0 else \
                TaskSucceeded(**ids, runner_id="r", at=logical + 2)
            events.append(end)
        events.append(DagRunFinished(dag_id="etl", run_id=run_id, state="failed" if failed else "success",
                                     at=logical + 3))
    return events


def per_minute(runs_kept: int | None = None, catchup: bool = False):
    event = parsed(schedule="* * * * *", start_date=START, catchup=catchup, edges=CHAIN10)
    definition = dataclasses.replace(event.definition, finished_runs_kept=runs_kept)
    return dataclasses.replace(event, definition=definition)


def settle(state: SchedulerState, now: float, fail: frozenset[str] = frozenset()) -> list:
    """Decide and fold until nothing is left; every queued try succeeds (fails if its run id is in ``fail``)."""
    decided: list = []
    for _ in range(500):
        events = decide(state, now, POLICY)
        if not events:
            return decided
        for event in events:
            evolve(state, event)
            if isinstance(event, TaskQueued):
                ids = {"dag_id": event.dag_id, "run_id": event.run_id, "task_id": event.task_id,
                       "try_number": event.try_number, "runner_id": "r", "at": now}
                evolve(state, TaskFailed(**ids, error="boom") if event.run_id in fail else TaskSucceeded(**ids))
        decided += events
    raise AssertionError("decisions never settled")


def rejections(decided: list) -> list[str]:
    return [event.reason for event in decided if type(event).__name__ == "CommandRejected"]


# -- bounded memory ------------------------------------------------------------------------------

def test_finished_runs_are_bounded_per_dag_however_many_finish():
    small = fold(kept(runs=10), [per_minute(), *scheduled_runs(50)])
    large = fold(kept(runs=10), [per_minute(), *scheduled_runs(1_000)])
    for state, total in ((small, 50), (large, 1_000)):
        assert len(state.finished) == 10 and state.forgotten["etl"].count == total - 10
        assert state.forgotten["etl"].scheduled.progressions() == [(START, 60, total - 10)]  # three numbers
    # Before the retention every finished run was kept: 1,000 runs made a snapshot 20 times as big.
    assert len(encoded(large)) < 1.2 * len(encoded(small))


def test_the_runs_finished_last_are_the_ones_kept():
    state = fold(kept(runs=3), [per_minute(), *scheduled_runs(8)])
    assert [run_id for _dag, run_id in state.finished] == [
        scheduled_run_id(logical_date_iso(START + number * MINUTE)) for number in (5, 6, 7)]


def test_a_dags_own_finished_runs_kept_overrides_the_setting():
    state = fold(kept(runs=3), [per_minute(runs_kept=5), *scheduled_runs(8)])
    assert len(state.finished) == 5
    nothing = fold(kept(runs=3), [per_minute(runs_kept=0), *scheduled_runs(4)])
    assert len(nothing.finished) == 0 and nothing.forgotten["etl"].count == 4


def test_the_next_run_is_the_same_whatever_was_forgotten():
    log = [per_minute(catchup=True), *scheduled_runs(30)]
    forgetful, keeping = fold(kept(runs=1), log), fold(kept(runs=1_000), log)
    now = START + 40 * MINUTE
    assert forgetful.next_due == keeping.next_due and forgetful.latest_scheduled == keeping.latest_scheduled
    assert decide_runs(forgetful, now, "s") == decide_runs(keeping, now, "s")
    created = [event.logical_date for event in decide_runs(forgetful, now, "s")]
    assert created == [START + minute * MINUTE for minute in range(30, 41)]  # catch-up, none of the forgotten


def test_a_live_scheduler_forgets_as_it_goes_and_keeps_deciding():
    state = fold(kept(runs=2), [per_minute()])
    for minute in range(6):
        settle(state, START + minute * MINUTE + 30)
    assert len(state.finished) == 2 and state.forgotten["etl"].count == 4 and not state.runs


# -- what a forgotten run still does ---------------------------------------------------------------

def test_a_trigger_repeated_after_its_run_was_forgotten_creates_nothing():
    state = fold(kept(runs=1), [parsed()])
    triggers = [TriggerDagRun(dag_id="etl", request_id=f"r{number}", at=1.0) for number in range(3)]
    for trigger in triggers:
        evolve(state, trigger)
        settle(state, 10.0)
    assert list(state.finished) == [("etl", "manual__r2")] and state.forgotten["etl"].count == 2
    evolve(state, triggers[0])
    assert settle(state, 20.0) == [] and not state.triggers
    evolve(state, DagRunCreated(dag_id="etl", run_id="manual__r0", logical_date=1.0, run_type="manual",
                                dag_fingerprint="fp", scheduler_id="s", at=20.0))
    assert not state.runs  # even a DagRunCreated of it (a stale owner's) revives nothing


def test_commands_naming_a_forgotten_run_are_refused_saying_so():
    state = fold(kept(runs=2), [per_minute(), *scheduled_runs(5)])
    forgotten = scheduled_run_id(logical_date_iso(START))
    for command in (ClearTask(dag_id="etl", run_id=forgotten, task_id="t0", request_id="c", at=9.0),
                    MarkTask(dag_id="etl", run_id=forgotten, task_id="t0", state="failed", request_id="m", at=9.0),
                    KillTask(dag_id="etl", run_id=forgotten, task_id="t0", request_id="k", at=9.0)):
        evolve(state, command)
    reasons = rejections(settle(state, START + 4 * MINUTE + 30))
    assert len(reasons) == 3
    assert all(f"run {forgotten} of DAG etl finished and was forgotten" in reason for reason in reasons)
    assert "keeps the newest 2 finished runs" in reasons[0] and "can no longer be cleared" in reasons[0]
    evolve(state, ClearTask(dag_id="etl", run_id="scheduled__1999-01-01T00:00:00+00:00", task_id="t0",
                            request_id="c2", at=9.0))
    assert rejections(settle(state, START + 4 * MINUTE + 30)) == [
        "DAG etl has no run scheduled__1999-01-01T00:00:00+00:00"]  # never existed: said as before


def test_a_backfill_leaves_the_dates_of_forgotten_runs_alone():
    state = fold(kept(runs=2), [per_minute(), *scheduled_runs(5, tasks=1, failed=True)])
    evolve(state, RequestBackfill(dag_id="etl", request_id="bf", start_date=START, end_date=START + 6 * MINUTE,
                                  reprocess_failed=True, at=9.0))
    [planned] = [event for event in settle(state, START + 10 * MINUTE) if type(event).__name__ == "BackfillPlanned"]
    # Minutes 0-2 were forgotten (left alone), 3-4 failed and are kept (re-run), 5-6 never ran.
    assert planned.logical_dates == [START + minute * MINUTE for minute in (3, 4, 5, 6)]


def test_a_backfill_longer_than_the_retention_finishes_and_says_it_failed():
    state = fold(kept(runs=1), [per_minute()])
    evolve(state, RequestBackfill(dag_id="etl", request_id="bf", start_date=START, end_date=START + 4 * MINUTE,
                                  at=9.0))
    first = "backfill__" + logical_date_iso(START)
    decided = settle(state, START - 10.0, fail=frozenset({first}))
    ended = [event for event in decided if type(event).__name__ == "BackfillFinished"]
    assert [event.state for event in ended] == ["failed"] and not state.backfills
    assert state.forgotten["etl"].count == 4 and state.forgotten["etl"].backfill.progressions() == [(START, 60, 4)]


# -- request ids ---------------------------------------------------------------------------------

def test_request_ids_are_kept_in_a_window_of_the_latest():
    ids = RequestIds()
    for number in range(5):
        ids.add(f"r{number}", keep=3)
    assert list(ids) == ["r2", "r3", "r4"] and "r1" not in ids and "r4" in ids
    ids.add("r3", keep=3)  # a repeat is no newer
    assert list(ids) == ["r2", "r3", "r4"]


def test_a_command_repeated_within_the_window_applies_once_and_after_it_again():
    state = fold(kept(requests=2), [parsed(), TriggerDagRun(dag_id="etl", request_id="t", at=1.0)])
    settle(state, 5.0)
    clear = ClearTask(dag_id="etl", run_id="manual__t", task_id="a", request_id="c1", at=9.0)
    evolve(state, clear)
    assert [type(event).__name__ for event in settle(state, 10.0)] == [
        "DagRunReopened", "TaskCleared", "TaskQueued", "DagRunFinished"]
    evolve(state, clear)
    assert settle(state, 11.0) == []  # remembered: applied once
    for number in range(2):  # two newer commands: c1 leaves the window
        evolve(state, MarkTask(dag_id="etl", run_id="manual__t", task_id="a", state="success",
                               request_id=f"m{number}", at=12.0))
        settle(state, 12.0)
    assert "c1" not in state.requests
    evolve(state, clear)
    assert "TaskCleared" in [type(event).__name__ for event in settle(state, 13.0)]  # a new command now


def test_a_backfill_repeated_while_under_way_is_not_planned_again_whatever_the_window():
    state = fold(kept(requests=1), [parsed(schedule="0 * * * *", start_date=1e9, max_active_runs=1)])
    backfill = RequestBackfill(dag_id="etl", request_id="bf", start_date=0.0, end_date=7200.0, at=1.0)
    evolve(state, backfill)
    fold(state, decide(state, 5.0, POLICY))  # planned, its first run created; nothing ends
    evolve(state, MarkTask(dag_id="etl", run_id="nope", task_id="a", state="success", request_id="other", at=6.0))
    fold(state, decide(state, 6.0, POLICY))
    assert "bf" not in state.requests and "bf" in state.backfills
    evolve(state, backfill)
    assert not state.backfill_requests
    assert "BackfillPlanned" not in [type(event).__name__ for event in decide(state, 7.0, POLICY)]


# -- a fold of the log alone ------------------------------------------------------------------------

@st.composite
def busy_logs(draw):
    """A scheduler's log (decisions and runners' outcomes) over many short runs, with commands
    on old and new runs: most runs end up forgotten."""
    state = fold(kept(runs=2, requests=3), [parsed(edges={"a": [], "b": ["a"]})])
    log: list = []
    now = 1.0
    for step in range(draw(st.integers(3, 12))):
        commands = [TriggerDagRun(dag_id="etl", request_id=f"r{step}", at=now)]
        for _ in range(draw(st.integers(0, 2))):
            run_id, request = f"manual__r{draw(st.integers(0, step))}", draw(st.sampled_from(["c1", "c2", "m1", "k1"]))
            commands.append(
                ClearTask(dag_id="etl", run_id=run_id, task_id="", request_id=request, at=now)
                if request.startswith("c") else
                MarkTask(dag_id="etl", run_id=run_id, task_id="b", state="failed", request_id=request, at=now)
                if request.startswith("m") else
                KillTask(dag_id="etl", run_id=run_id, task_id="a", request_id=request, at=now))
        for event in commands:
            evolve(state, event)
            log.append(event)
        for _ in range(20):
            decisions = decide(state, now, POLICY)
            if not decisions:
                break
            for event in decisions:
                evolve(state, event)
                log.append(event)
                if isinstance(event, TaskQueued):
                    outcome = TaskSucceeded(dag_id="etl", run_id=event.run_id, task_id=event.task_id,
                                            try_number=event.try_number, runner_id="r", at=now)
                    evolve(state, outcome)
                    log.append(outcome)
            now += 1.0
    return log


@settings(max_examples=40, deadline=None)
@given(busy_logs(), st.data())
def test_replay_and_snapshot_plus_tail_forget_the_same_runs(log, data):
    cut = data.draw(st.integers(0, len(log)))
    start = [parsed(edges={"a": [], "b": ["a"]})]
    replayed = fold(kept(runs=2, requests=3), start + log)
    from_snapshot = fold(restored(fold(kept(runs=2, requests=3), start + log[:cut])), log[cut:])
    assert from_snapshot == replayed and repr(from_snapshot) == repr(replayed)
    assert from_snapshot.forgotten == replayed.forgotten and list(from_snapshot.requests) == list(replayed.requests)
    assert len(replayed.finished) <= 2


# -- date sets ---------------------------------------------------------------------------------------

DATES = st.one_of(st.integers(0, 40).map(lambda minute: float(minute * 60)),
                  st.integers(0, 2_400).map(float), st.floats(0, 2_400, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(DATES, max_size=60))
def test_a_date_set_holds_exactly_what_was_added_in_sorted_disjoint_progressions(dates):
    found = DateSet()
    for date in dates:
        found.add(date)
    assert list(found) == sorted(set(dates)) and len(found) == len(set(dates))
    assert all(date in found for date in dates)
    assert not any(probe in found for probe in (-1.0, 2_401.0, 0.5 + 3 * 60) if probe not in dates)
    ends = [(start, start + (count - 1) * step) for start, step, count in found.progressions()]
    assert all(first_end < second_start for (_a, first_end), (second_start, _b)
               in zip(ends, ends[1:], strict=False))
    assert all((step == 0) == (count == 1) for _start, step, count in found.progressions())
    assert DateSet(*found.packed()) == found


def test_a_regular_schedule_forgotten_in_any_order_of_stretches_stays_few_progressions():
    found = DateSet()
    for minute in [*range(100, 200), *range(0, 100), *range(300, 400)]:
        found.add(minute * 60.0)
    assert found.progressions() == [(0, 60, 200), (300 * 60, 60, 100)]


# -- the DAG's own setting -----------------------------------------------------------------------------

def test_a_dag_file_sets_its_finished_runs_kept_and_a_bad_value_is_its_parse_error():
    assert DAG("kept", finished_runs_kept=7).to_definition("/dags/kept.py").finished_runs_kept == 7
    assert DAG("default").to_definition("/dags/default.py").finished_runs_kept is None
    for bad in (-1, 2.5, True, "10", 10**7):
        with pytest.raises(DagDefinitionError, match="finished_runs_kept must be None or an integer from 0"):
            DAG(f"bad{abs(hash(bad))}", finished_runs_kept=bad)


def test_the_settings_defaults_are_the_cores_and_reach_every_partitions_fold():
    assert retention_of(load_settings({})) == Retention()
    assert retention_of(load_settings({"TOCK_SCHEDULER_FINISHED_RUNS_KEPT": "5",
                                       "TOCK_SCHEDULER_REQUEST_IDS_KEPT": "7"})) == Retention(5, 7)


# -- with the live scheduler's read-back (test_scheduler_live_equals_replay.py), forgetting as it goes --

@dataclasses.dataclass
class ForgetfulWorld(World):
    """That test's world, keeping one finished run and two request ids, with commands naming any run
    ever created (finished, forgotten or open)."""

    memory: PartitionMemory = dataclasses.field(
        default_factory=lambda: PartitionMemory(0, state=kept(runs=1, requests=2)))

    def replayed(self, upto: int | None = None) -> SchedulerState:
        return fold(fold(kept(runs=1, requests=2), [LIVE_DAG]), self.log[:upto])

    def _instance_keys(self) -> list[tuple[str, str]]:
        created = sorted({event.run_id for event in self.log if isinstance(event, DagRunCreated)})
        return [(run_id, task_id) for run_id in created for task_id in ("a", "b")]


# Walks long and busy enough that runs finish and are forgotten (about half the examples), and
# commands name forgotten runs (about a third).
BUSY = ("poll",) * 4 + ("decide",) * 4 + ("start",) * 3 + ("end",) * 4 + ("trigger", "clear", "kill", "mark")
busy_steps = st.lists(st.tuples(st.sampled_from(BUSY), st.integers(0, 50)), min_size=150, max_size=300)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_steps, st.integers(0, 1000))
def test_the_live_memory_forgets_what_a_replay_and_a_snapshot_plus_tail_forget(actions, cut):
    world = ForgetfulWorld()
    for action, pick in actions:
        world.act(action, pick)
        assert world.memory.state == world.replayed(world.memory.positions["events"]), f"after {action}"
    world.read(len(world.log))
    full = world.replayed()
    assert world.memory.state == full and len(full.finished) <= 1
    cut %= len(world.log) + 1
    assert fold(restored(world.replayed(cut)), world.log[cut:]) == full
