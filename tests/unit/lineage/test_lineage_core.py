"""The lineage core: given these records of tock.events, these OpenLineage run events (services/lineage/core)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    TaskAdopted,
    TaskDeclaredDead,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskPoked,
    TaskQueued,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
)
from services.lineage.core import (
    ABORT,
    COMPLETE,
    DAG_JOB,
    FAIL,
    RUNNING,
    START,
    TASK_JOB,
    DatasetRef,
    Failure,
    LineageConfig,
    LineageState,
    UnknownEvent,
    dag_run_uuid,
    dataset_of,
    evolve,
    lineage_of_log,
    try_uuid,
)

DAG, RUN = "etl", "manual__1"


def created(at: float = 1.0, run_id: str = RUN, asset_events_json: str = "") -> DagRunCreated:
    return DagRunCreated(dag_id=DAG, run_id=run_id, logical_date=100.0, run_type="manual", dag_fingerprint="f",
                         scheduler_id="s1", asset_events_json=asset_events_json, at=at)


def queued(task: str, number: int = 1, at: float = 2.0, map_index: int = -1, inlets: str = "") -> TaskQueued:
    return TaskQueued(dag_id=DAG, run_id=RUN, task_id=task, map_index=map_index, try_number=number,
                      executor="local", queue="default", scheduler_id="s1", logical_date=100.0,
                      data_interval_start=90.0, data_interval_end=100.0, inlet_events_json=inlets, at=at)


def started(task: str, number: int = 1, at: float = 3.0, map_index: int = -1, runner: str = "r1") -> TaskStarted:
    return TaskStarted(dag_id=DAG, run_id=RUN, task_id=task, map_index=map_index, try_number=number,
                       runner_id=runner, hostname="h", pid=1, at=at)


def succeeded(task: str, number: int = 1, at: float = 4.0, map_index: int = -1, assets: str = "") -> TaskSucceeded:
    return TaskSucceeded(dag_id=DAG, run_id=RUN, task_id=task, map_index=map_index, try_number=number,
                         runner_id="r1", asset_events_json=assets, at=at)


def failed(task: str, number: int = 1, at: float = 4.0) -> TaskFailed:
    return TaskFailed(dag_id=DAG, run_id=RUN, task_id=task, try_number=number, runner_id="r1", error="boom",
                      traceback="Traceback...\nRuntimeError: boom", at=at)


def finished(state: str, at: float = 9.0, reason: str = "") -> DagRunFinished:
    return DagRunFinished(dag_id=DAG, run_id=RUN, state=state, reason=reason, at=at)


def summary(events) -> list[tuple[str, str, int, str]]:
    """(event type, job name, try number, Tock's word) of each lineage event."""
    return [(item.event_type, item.run.job.name, item.tock.try_number, item.tock.state) for item in events]


def test_a_run_with_a_success_writing_an_asset_gives_start_and_complete_for_the_run_and_the_try():
    assets = json.dumps([{"uri": "s3://lake/orders", "name": "orders", "group": "asset", "extra": {}, "alias": ""}])
    events = lineage_of_log([created(), queued("load", inlets='{"s3://lake/raw": []}'), started("load"),
                             succeeded("load", assets=assets), finished("success")])
    assert summary(events) == [(START, DAG, 0, "created"), (START, "etl.load", 1, "started"),
                               (COMPLETE, "etl.load", 1, "succeeded"), (COMPLETE, DAG, 0, "success")]
    run_start, try_start, try_complete, run_complete = events
    run_uuid, load_uuid = dag_run_uuid("tock", DAG, RUN, 0), try_uuid("tock", DAG, RUN, "load", -1, 1)
    assert (run_start.run.run_id, run_start.job_type, run_start.parent) == (run_uuid, DAG_JOB, None)
    assert (try_start.run.run_id, try_start.job_type) == (load_uuid, TASK_JOB)
    assert try_start.parent is not None and try_start.parent.run_id == run_uuid and try_start.parent.job.name == DAG
    assert (try_start.nominal_start, try_start.nominal_end, run_start.nominal_start) == (90.0, 100.0, 100.0)
    assert try_start.inputs == (DatasetRef("s3://lake", "raw"),) and try_start.outputs == ()
    assert try_complete.outputs == (DatasetRef("s3://lake", "orders"),)
    assert (run_complete.inputs, run_complete.outputs) == ((DatasetRef("s3://lake", "raw"),),
                                                          (DatasetRef("s3://lake", "orders"),))
    assert [item.event_time for item in events] == [1.0, 3.0, 4.0, 9.0]  # the events' own times
    assert [(item.tock.offset, item.tock.index) for item in events] == [(0, 0), (2, 0), (3, 0), (4, 0)]


def test_a_failure_then_its_retry_are_two_runs_of_the_task_each_with_one_start_and_one_end():
    events = lineage_of_log([
        created(), queued("load"), started("load"), failed("load"),
        TaskRetryScheduled(dag_id=DAG, run_id=RUN, task_id="load", try_number=1, next_try_number=2, not_before=5.0,
                           at=4.5),
        queued("load", 2, at=5.0), started("load", 2, at=6.0), succeeded("load", 2, at=7.0), finished("success")])
    assert summary(events) == [(START, DAG, 0, "created"), (START, "etl.load", 1, "started"),
                               (FAIL, "etl.load", 1, "failed"), (START, "etl.load", 2, "started"),
                               (COMPLETE, "etl.load", 2, "succeeded"), (COMPLETE, DAG, 0, "success")]
    assert events[2].failure == Failure("boom", "Traceback...\nRuntimeError: boom")
    assert events[1].run.run_id == events[2].run.run_id != events[3].run.run_id == events[4].run.run_id


@pytest.mark.parametrize(("ending", "expected"), [
    (TaskDeclaredDead(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, reason="no heartbeat for 60 s",
                      scheduler_id="s2", at=5.0), (ABORT, "declared_dead", "declared dead: no heartbeat for 60 s")),
    (TaskKilled(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, runner_id="r1", reason="killed by an operator",
                at=5.0), (ABORT, "killed", "killed by an operator")),
    (TaskTrySkipped(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, runner_id="r1", at=5.0),
     (COMPLETE, "skipped", None)),
    (TaskPoked(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, runner_id="r1", at=5.0), (COMPLETE, "poked", None)),
    (TaskPoked(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, runner_id="r1", timed_out=True, at=5.0),
     (FAIL, "poke_timed_out", "the sensor timed out")),
])
def test_how_a_started_try_ends(ending, expected):
    *_, last = lineage_of_log([created(), queued("t"), started("t"), ending])
    assert (last.event_type, last.tock.state, last.failure and last.failure.message) == expected


def test_whatever_comes_after_a_try_ended_emits_nothing_a_late_outcome_nor_a_second_runner():
    dead = TaskDeclaredDead(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, reason="lost", scheduler_id="s2",
                            at=5.0)
    events = lineage_of_log([created(), queued("t"), started("t"), started("t", runner="r2"), dead,
                             succeeded("t", at=6.0), failed("t", at=7.0), started("t", runner="r3")])
    assert summary(events) == [(START, DAG, 0, "created"), (START, "etl.t", 1, "started"),
                               (ABORT, "etl.t", 1, "declared_dead")]


def test_an_event_of_an_older_try_than_its_instances_latest_emits_nothing():
    events = lineage_of_log([created(), queued("t"), started("t"), failed("t"), queued("t", 2, at=5.0),
                             succeeded("t", 1, at=6.0), started("t", 1, at=6.5), started("t", 2, at=7.0)])
    assert summary(events)[-1] == (START, "etl.t", 2, "started") and len(events) == 4


def test_a_kill_request_before_any_runner_claimed_the_try_aborts_it_and_no_later_start_counts():
    kill = TaskKillRequested(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, reason="killed by an operator",
                             scheduler_id="s1", at=2.5)
    events = lineage_of_log([created(), queued("t"), kill, started("t"), succeeded("t")])
    assert summary(events) == [(START, DAG, 0, "created"), (ABORT, "etl.t", 1, "kill_requested")]


def test_a_kill_request_of_a_running_try_waits_for_the_runners_answer():
    kill = TaskKillRequested(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, reason="cleared", scheduler_id="s1",
                             at=3.5)
    killed = TaskKilled(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, runner_id="r1", reason="cleared", at=4.0)
    assert summary(lineage_of_log([created(), queued("t"), started("t"), kill, killed]))[2:] == [
        (ABORT, "etl.t", 1, "killed")]


def test_an_adoption_of_a_started_try_is_running_and_of_one_not_started_nothing():
    adopted = TaskAdopted(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, handle="1@h", by_scheduler="s2",
                          from_scheduler="s1", at=3.5)
    assert summary(lineage_of_log([created(), queued("t"), adopted])) == [(START, DAG, 0, "created")]
    events = lineage_of_log([created(), queued("t"), started("t"), adopted, adopted, succeeded("t")])
    assert [item.event_type for item in events] == [START, START, RUNNING, RUNNING, COMPLETE]
    assert len({item.run.run_id for item in events[1:]}) == 1


def test_a_run_that_failed_names_its_failed_instances_and_one_with_a_reason_of_its_own_is_aborted():
    *_, last = lineage_of_log([created(), queued("a"), started("a"), failed("a"), finished("failed")])
    assert (last.event_type, last.failure) == (FAIL, Failure("failed task instances: a"))
    *_, last = lineage_of_log([created(), finished("failed", reason="DAG etl was deleted (its file is gone)")])
    assert (last.event_type, last.failure) == (ABORT, Failure("DAG etl was deleted (its file is gone)"))


def test_a_reopened_run_is_a_new_incarnation_whose_tries_name_it_as_their_parent():
    reopened = DagRunReopened(dag_id=DAG, run_id=RUN, request_id="c1", at=10.0)
    events = lineage_of_log([created(), queued("t"), started("t"), succeeded("t"), finished("success"), reopened,
                             reopened, queued("t", 2, at=11.0), started("t", 2, at=12.0),
                             succeeded("t", 2, at=13.0), finished("success", at=14.0)])
    assert [(item.event_type, item.tock.incarnation) for item in events if item.job_type == DAG_JOB] == [
        (START, 0), (COMPLETE, 0), (START, 1), (COMPLETE, 1)]
    second = dag_run_uuid("tock", DAG, RUN, 1)
    assert events[4].run.run_id == second != dag_run_uuid("tock", DAG, RUN, 0)
    assert events[5].parent is not None and events[5].parent.run_id == second


def test_mapped_instances_are_runs_of_one_job_told_apart_by_map_index():
    events = lineage_of_log([created(), queued("m", map_index=0), queued("m", map_index=1),
                             started("m", map_index=0), started("m", map_index=1)])
    assert [(item.run.job.name, item.tock.map_index) for item in events[1:]] == [("etl.m", 0), ("etl.m", 1)]
    assert events[1].run.run_id == try_uuid("tock", DAG, RUN, "m", 0, 1) != events[2].run.run_id


def test_decisions_that_start_no_try_emit_nothing_and_the_namespace_comes_from_the_config():
    launched = TaskLaunched(dag_id=DAG, run_id=RUN, task_id="t", try_number=1, executor="local", handle="1@h",
                            scheduler_id="s1", at=2.5)
    skipped = TaskSkipped(dag_id=DAG, run_id=RUN, task_id="u", at=2.6)
    events = lineage_of_log([created(), launched, skipped], LineageConfig(namespace="prod"))
    assert [(item.run.job.namespace, item.run.run_id) for item in events] == [
        ("prod", dag_run_uuid("prod", DAG, RUN, 0))]


def test_an_asset_triggered_run_reads_the_assets_that_triggered_it():
    triggering = json.dumps([{"uri": "s3://lake/orders", "event_id": "e1"}, {"uri": "orders_table"}])
    (start,) = lineage_of_log([created(asset_events_json=triggering)])
    assert start.inputs == (DatasetRef("s3://lake", "orders"), DatasetRef("asset", "orders_table"))


@pytest.mark.parametrize(("uri", "dataset"), [
    ("s3://lake/orders", ("s3://lake", "orders")),
    ("postgres://db:5432/shop.public.orders", ("postgres://db:5432", "shop.public.orders")),
    ("file:///data/x.csv", ("file", "/data/x.csv")),
    ("orders", ("asset", "orders")),
    ("s3://bucket", ("s3://bucket", "/")),
])
def test_an_asset_uri_as_a_dataset(uri, dataset):
    assert dataset_of(uri) == DatasetRef(*dataset)


def test_a_value_that_is_no_event_of_the_log_is_refused():
    with pytest.raises(UnknownEvent):
        evolve(LineageState(), "TaskStarted")  # type: ignore[arg-type] # what the check is for


LOG = [created(), queued("a"), started("a"), failed("a"), queued("a", 2, at=5.0), started("a", 2, at=6.0),
       TaskAdopted(dag_id=DAG, run_id=RUN, task_id="a", try_number=2, handle="1@h", by_scheduler="s2",
                   from_scheduler="s1", at=6.5),
       succeeded("a", 2, at=7.0), queued("b", at=7.5), started("b", at=8.0), succeeded("b", at=8.5),
       finished("success")]


@given(st.integers(min_value=0, max_value=len(LOG)))
def test_folding_the_log_in_two_pieces_gives_what_folding_it_at_once_gives(cut):
    state = LineageState()
    first = lineage_of_log(LOG[:cut], state=state)
    rest = lineage_of_log(LOG[cut:], state=state)
    at_once = lineage_of_log(LOG)
    assert [(item.run, item.event_type, item.event_time) for item in first + rest] == [
        (item.run, item.event_type, item.event_time) for item in at_once]


def test_the_same_log_gives_equal_events_every_time():
    assert lineage_of_log(LOG) == lineage_of_log(LOG)
