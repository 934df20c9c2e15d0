"""TaskFlow through the real system: values pass from task to task through the log, on the local, Celery
and Kubernetes executors, and a scheduler killed between a success and its downstream's start loses
no value (the value is in the success's own record; the next owner reads it from the log)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from sqlalchemy.exc import SQLAlchemyError

from projections import queries
from projections.db import open_engine
from schemas import DagRunCreated, TaskQueued, TaskStarted, TaskSucceeded, TryInput
from tests.scenarios.celery_support import Workers
from tests.scenarios.kube_support import kube_settings, on_every_executor
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    environment,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)
from tock.values import decode_values

pytestmark = pytest.mark.scenario

TUTORIAL = '''
import time
from tock import DAG, BashTask, task

with DAG("taskflow_tutorial", params={{"currency": "EUR"}}) as dag:
    @task(executor="{extract_on}")
    def extract():
        time.sleep({extract_seconds})
        return {{"1001": 301.27, "1002": 433.21, "1003": 502.22}}

    @task(multiple_outputs=True, executor="{transform_on}")
    def transform(order_data: dict):
        return {{"total_order_value": round(sum(order_data.values()), 2)}}

    @task(executor="{load_on}")
    def load(total_order_value: float, ti=None, params=None):
        return f"total {{total_order_value:.2f}} read by try {{ti.try_number}}"

    summary = transform(extract())
    load(summary["total_order_value"])
    pulled = "ti.xcom_pull(task_ids='transform', key='total_order_value')"
    summary >> BashTask("report", 'echo "day {{{{ ds }}}} total {{{{ ' + pulled + ' }}}} {{{{ params.currency }}}}"')
'''

TOTAL = 1236.7


def _values(tail: LogTail, run_id: str, task_id: str) -> dict:
    [succeeded] = tail.of_type(TaskSucceeded, run_id=run_id, task_id=task_id)
    return decode_values(succeeded.values_json)


def _inputs(tail: LogTail, run_id: str, task_id: str) -> list[TryInput]:
    [queued] = tail.of_type(TaskQueued, run_id=run_id, task_id=task_id)
    return queued.inputs


def _dag(tmp_path, **choices) -> object:
    path = tmp_path / "dags" / "tutorial.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(TUTORIAL.format(**{"extract_seconds": 0, **choices}))
    return path


def test_the_tutorial_passes_its_values_across_local_celery_and_kubernetes(make_settings, kube_namespace,
                                                                           redis_url, system, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    on_every_executor(settings, system, tmp_path)
    publish_dags(settings, _dag(tmp_path, extract_on="local", transform_on="celery", load_on="kubernetes"))
    system["processes"].scheduler("s1")
    tail = system["tail"]
    run_id = trigger(settings, "taskflow_tutorial")
    assert tail.run_finished(run_id, 180).state == "success"
    assert {event.task_id: event.executor for event in tail.of_type(TaskStarted, run_id=run_id)} == {
        "extract": "local", "transform": "celery", "load": "kubernetes", "report": "local"}
    [created] = tail.of_type(DagRunCreated, run_id=run_id)
    day = datetime.fromtimestamp(created.logical_date, UTC).strftime("%Y-%m-%d")
    assert _values(tail, run_id, "report") == {"return_value": f"day {day} total {TOTAL} EUR"}
    assert _values(tail, run_id, "transform") == {"total_order_value": TOTAL,
                                                 "return_value": {"total_order_value": TOTAL}}
    assert _values(tail, run_id, "load") == {"return_value": f"total {TOTAL:.2f} read by try 1"}
    # provenance: each downstream try names the upstream try whose values it read
    [extracted] = _inputs(tail, run_id, "transform")
    assert (extracted.task_id, extracted.try_number) == ("extract", 1)
    assert json.loads(extracted.values_json) == json.loads(
        tail.of_type(TaskSucceeded, run_id=run_id, task_id="extract")[0].values_json)
    [queued_load] = tail.of_type(TaskQueued, run_id=run_id, task_id="load")
    assert (queued_load.logical_date, queued_load.run_type) == (created.logical_date, "manual")


def test_a_scheduler_killed_before_a_success_is_read_loses_no_value(make_settings, system, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    system["processes"], system["tail"] = Processes(settings, tmp_path / "logs"), LogTail(settings)
    processes, tail = system["processes"], system["tail"]
    publish_dags(settings, _dag(tmp_path, extract_on="local", transform_on="local", load_on="local",
                                extract_seconds=3))
    first = processes.scheduler("s1")
    run_id = trigger(settings, "taskflow_tutorial")
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id, task_id="extract"), 60, "extract to start")
    kill_hard(first.pid)  # extract's runner outlives it; its success lands with no scheduler to read it
    tail.wait_for(lambda _events: tail.of_type(TaskSucceeded, run_id=run_id, task_id="extract"), 60,
                  "extract to succeed")
    assert not tail.of_type(TaskQueued, run_id=run_id, task_id="transform")
    processes.scheduler("s2")
    assert tail.run_finished(run_id, 120).state == "success"
    assert _values(tail, run_id, "load") == {"return_value": f"total {TOTAL:.2f} read by try 1"}
    assert [item.task_id for item in _inputs(tail, run_id, "transform")] == ["extract"]
    _replayed_alone_gives_the_same_value(settings, processes, run_id, tmp_path / "dags" / "tutorial.py")


def _replayed_alone_gives_the_same_value(settings, processes: Processes, run_id: str, dag_path) -> None:
    """`tock tasks test --replay`: transform, alone, with the TaskQueued its try was queued with."""
    processes.start("projector", name="projector")
    engine = open_engine(settings)
    try:
        wait_until(lambda: any(row["event_type"] == "TaskQueued" for row in
                               _history(engine, run_id, "transform")), 60, "the projector to fold transform's history")
    finally:
        engine.dispose()
    done = subprocess.run([sys.executable, "-m", "tock_cli", "tasks", "test", "taskflow_tutorial", "transform",
                           "--replay", run_id, "--file", str(dag_path)], env=environment(settings),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f'transform: success · {{"total_order_value":{TOTAL},"return_value":{{"total_order_value":{TOTAL}}}}}' \
        in done.stdout


def _history(engine, run_id: str, task_id: str) -> list:
    try:
        return queries.task_history(engine, "taskflow_tutorial", run_id, task_id)
    except SQLAlchemyError:  # the projector has not created its tables yet
        return []


BIG = '''
from tock import DAG, task

with DAG("big_values") as dag:
    @task
    def produce():
        return "x" * 3_000_000

    @task
    def measure(text):
        return len(text)

    measure(produce())
'''


def test_a_value_of_megabytes_travels_past_the_brokers_default_record_size(make_settings, system, tmp_path):
    # tock.events takes 16 MiB records (the broker's default is 1 MB): a 3 MB success, then a 3 MB
    # TaskQueued, read by the scheduler, the runner's claim and the projector.
    settings = make_settings(task_heartbeat_seconds=0.5, xcom_max_bytes=4 * 1024 * 1024)
    create_topics(settings)
    system["processes"], system["tail"] = Processes(settings, tmp_path / "logs"), LogTail(settings)
    path = tmp_path / "dags" / "big.py"
    path.parent.mkdir()
    path.write_text(BIG)
    publish_dags(settings, path)
    system["processes"].scheduler("s1")
    system["processes"].start("projector", name="projector")
    run_id = trigger(settings, "big_values")
    tail = system["tail"]
    assert tail.run_finished(run_id, 120).state == "success"
    assert _values(tail, run_id, "measure") == {"return_value": 3_000_000}
    engine = open_engine(settings)
    try:
        wait_until(lambda: (queries.task_instance(engine, "big_values", run_id, "measure") or {}).get("state")
                   == "success", 60, "the projector to fold the run")
    finally:
        engine.dispose()
