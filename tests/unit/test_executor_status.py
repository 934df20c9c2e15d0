"""Executor workers and executor status: given events, then rows; the report from plain rows."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.log.records import routing_key
from projections.executor_status import executor_status, live_tries, silence_limit
from projections.view import View, fold
from schemas import TaskLaunched, TaskQueued, TaskStarted, WorkerHeartbeat, WorkerStopped
from tests.unit.projection_logs import LogBuilder

AT = 1_700_000_000.0
LIMIT = 15.0


def _beat(worker: str = "w1", at: float = AT, executor: str = "celery", queues=("default",)) -> WorkerHeartbeat:
    return WorkerHeartbeat(worker=worker, executor=executor, hostname="host-a", pid=11, queues=list(queues),
                           concurrency=4, at=at)


def _records(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return builder.records


def _workers(*events) -> dict:
    return fold(_records(*events)).rows["executor_worker"]


def test_presence_is_keyed_by_worker_apart_from_schedulers():
    assert routing_key(_beat("s1")) == ("worker/s1", "worker/s1")
    assert routing_key(WorkerStopped(worker="s1", executor="celery", at=AT)) == ("worker/s1", "worker/s1")


def test_a_heartbeat_names_the_worker_its_queues_and_concurrency():
    row = _workers(_beat(queues=("gpu", "default", "gpu")))[("w1",)]
    assert row == {"worker": "w1", "executor": "celery", "hostname": "host-a", "pid": 11,
                   "queues_json": '["default","gpu","gpu"]', "concurrency": 4, "first_seen": AT,
                   "last_heartbeat": AT, "stopped_at": None}


def test_a_stop_is_kept_until_the_worker_beats_again():
    stopped = WorkerStopped(worker="w1", executor="celery", at=AT + 5)
    row = _workers(_beat(), _beat(at=AT + 2), stopped)[("w1",)]
    assert (row["first_seen"], row["last_heartbeat"], row["stopped_at"]) == (AT, AT + 2, AT + 5)
    back = _workers(_beat(), stopped, _beat(at=AT + 9))[("w1",)]
    assert (back["first_seen"], back["last_heartbeat"], back["stopped_at"]) == (AT, AT + 9, None)


def test_a_stop_of_a_worker_never_seen_is_a_row_without_heartbeat():
    row = _workers(WorkerStopped(worker="w9", executor="celery", at=AT))[("w9",)]
    assert (row["executor"], row["last_heartbeat"], row["stopped_at"]) == ("celery", None, AT)


_presence = st.builds(lambda worker, at, stop: WorkerStopped(worker=worker, executor="celery", at=at) if stop
                      else _beat(worker, at), st.sampled_from(("w1", "w2", "w3")),
                      st.floats(min_value=AT, max_value=AT + 1000, allow_nan=False), st.booleans())


@settings(max_examples=100, deadline=None)
@given(events=st.lists(_presence, max_size=30), cut=st.integers(min_value=0, max_value=30))
def test_folding_presence_in_one_go_equals_folding_it_in_pieces(events, cut):
    records = _records(*events)
    first = fold(records[:cut])
    pieces = fold(records[cut:], View(rows={table: dict(rows) for table, rows in first.rows.items()},
                                      offsets=dict(first.offsets)))
    assert pieces.rows["executor_worker"] == fold(records).rows["executor_worker"]


def test_each_try_keeps_the_executor_and_queue_its_task_queued_wrote():
    ids = {"dag_id": "etl", "run_id": "r1", "task_id": "load", "try_number": 1}
    rows = fold(_records(TaskQueued(**ids, executor="celery", queue="gpu", scheduler_id="s1", at=AT),
                         TaskLaunched(**ids, executor="local", handle="h", scheduler_id="s1", at=AT + 1),
                         TaskStarted(**ids, runner_id="r", hostname="h", pid=1, executor="x", queue="y", at=AT + 2)))
    row = rows.rows["task_instance"][("etl", "r1", "load", -1)]
    assert (row["state"], row["executor"], row["queue"]) == ("running", "celery", "gpu")


# --- live tries (for a scheduler's in-memory tries) -----------------------------------------

@dataclass
class _Try:
    executor: str
    queue: str


def test_live_tries_count_per_executor_and_queue():
    tries = [_Try("celery", "default"), _Try("celery", "gpu"), _Try("celery", "default"), _Try("local", "default")]
    assert live_tries(tries) == {"celery": {"default": 2, "gpu": 1}, "local": {"default": 1}}
    assert live_tries([]) == {}


# --- the report from rows -------------------------------------------------------------------

def _counts(*rows):
    return [dict(zip(("executor", "queue", "state", "tries"), row, strict=False)) for row in rows]


def _worker_row(worker, executor="celery", last=AT, stopped=None, queues='["default"]'):
    return {"worker": worker, "executor": executor, "hostname": "h", "pid": 3, "queues_json": queues,
            "concurrency": 4, "first_seen": last, "last_heartbeat": last, "stopped_at": stopped}


def _scheduler_row(scheduler_id, last=AT, state="alive", stopped=None):
    return {"scheduler_id": scheduler_id, "hostname": "h", "pid": 5, "partitions_json": "[0]", "state": state,
            "first_seen": last, "last_heartbeat": last, "stopped_at": stopped}


def test_the_report_counts_tries_per_queue_and_judges_workers_at_read_time():
    status = executor_status(
        _counts(("celery", "default", "running", 2), ("celery", "gpu", "queued", 1),
                ("celery", "default", "queued", 3), ("local", "default", "running", 1)),
        {"celery": AT - 1}, [_worker_row("w1", last=AT - 2), _worker_row("w2", last=AT - 60),
                             _worker_row("w3", stopped=AT - 1)],
        [_scheduler_row("s1", last=AT - 4), _scheduler_row("s2", state="stopped", stopped=AT - 100)],
        now=AT, limit=LIMIT, configured=["local"])
    celery, local = status
    assert (celery["executor"], celery["configured"], celery["running"], celery["queued"]) == ("celery", False, 2, 4)
    assert celery["queues"] == [{"queue": "default", "queued": 3, "running": 2},
                                {"queue": "gpu", "queued": 1, "running": 0}]
    assert [(w["worker"], w["state"], w["age"]) for w in celery["workers"]] == [
        ("w1", "alive", 2.0), ("w2", "dead", 60.0), ("w3", "stopped", 0.0)]
    assert (celery["workers_alive"], celery["workers_seen"], celery["last_task_heartbeat"]) == (1, 3, AT - 1)
    assert [(w["worker"], w["kind"], w["state"]) for w in local["workers"]] == [
        ("s1", "scheduler", "alive"), ("s2", "scheduler", "stopped")]
    assert (local["configured"], local["running"], local["last_task_heartbeat"]) == (True, 1, None)


@pytest.mark.parametrize("silent_for, state", [(0.0, "alive"), (LIMIT, "alive"), (LIMIT + 0.1, "dead")])
def test_a_worker_is_alive_within_the_limit(silent_for, state):
    [entry] = executor_status([], {}, [_worker_row("w1", last=AT - silent_for)], [], now=AT, limit=LIMIT)
    assert entry["workers"][0]["state"] == state


def test_a_configured_executor_without_tries_or_workers_is_listed_empty():
    assert executor_status([], {}, [], [_scheduler_row("s1")], now=AT, limit=LIMIT, configured=["celery"]) == [
        {"executor": "celery", "configured": True, "queued": 0, "running": 0, "queues": [], "workers_alive": 0,
         "workers_seen": 0, "last_task_heartbeat": None, "workers": []}]


def test_the_silence_limit_is_three_heartbeat_intervals():
    assert silence_limit(5.0) == 15.0

