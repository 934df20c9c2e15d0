"""Scenarios of the Celery executor with real `tock worker` processes over the session's Redis:
mixed executors in one DAG, a scheduler killed under running Celery tries, a worker whose
default queue and reports differ from the tasks', and a message delivered twice."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import psutil
import pytest

from infra.executors.celery import celery_task_id
from infra.executors.requests import TryRequest
from infra.log import KafkaEventLog
from schemas import (
    KillTask,
    TaskAdopted,
    TaskDeclaredDead,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.celery_support import Workers, lines_of
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)
from tests.scenarios.snooping import Secrets, assert_nothing_found, snooping_dag

pytestmark = pytest.mark.scenario

MIXED = '''
from tock import DAG, BashTask

with DAG("mixed") as dag:
    first = BashTask("local_first", 'echo "$TOCKRUN_TASK_ID" >> {ran}')
    middle = [BashTask(f"celery_{{index}}", 'echo "$TOCKRUN_TASK_ID" >> {ran}', executor="celery")
              for index in range(3)]
    last = BashTask("local_last", 'echo "$TOCKRUN_TASK_ID" >> {ran}')
    first >> middle >> last
'''

SLEEPERS = '''
from tock import DAG, BashTask

with DAG("celery_sleepers", retries=1, retry_delay=0) as dag:
    for index in range({count}):
        BashTask(f"sleep_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; sleep {seconds}',
                 executor="celery", queue="{queue}")
'''


@pytest.fixture
def settings(make_settings, redis_url):
    settings = make_settings(celery_broker_url=redis_url, task_heartbeat_seconds=0.5, task_heartbeat_timeout=15,
                             scheduler_session_timeout=6)
    create_topics(settings)
    return settings


@pytest.fixture
def system(settings, tmp_path):
    """(workers, processes, log tail) for the test; all stopped at its end."""
    workers, processes, tail = Workers(settings, tmp_path / "hosts"), Processes(settings, tmp_path / "logs"), \
        LogTail(settings)
    yield workers, processes, tail
    processes.close()
    workers.close()
    tail.close()


def dag_file(tmp_path, source: str, **values):
    path = tmp_path / "dags" / "dag.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source.format(**values))
    return path


def test_a_dag_with_local_and_celery_tasks_succeeds_and_shows_where_each_try_ran(settings, system, tmp_path):
    workers, processes, tail = system
    ran = tmp_path / "ran.txt"
    path = dag_file(tmp_path, MIXED, ran=ran)
    workers.start("host-a")
    publish_dags(settings, path)
    processes.scheduler("s1")
    run_id = trigger(settings, "mixed")
    assert tail.run_finished(run_id, 90).state == "success"
    started = {event.task_id: event for event in tail.of_type(TaskStarted, run_id=run_id)}
    assert {task: (event.executor, event.hostname) for task, event in started.items()} == {
        "local_first": ("local", settings.host), "local_last": ("local", settings.host),
        **{f"celery_{index}": ("celery", "host-a") for index in range(3)}}
    launched = {event.task_id: event for event in tail.of_type(TaskLaunched, run_id=run_id)}
    for index in range(3):
        request = TryRequest("mixed", run_id, f"celery_{index}", 1, str(path))
        assert (launched[f"celery_{index}"].handle, launched[f"celery_{index}"].queue) == (
            celery_task_id(settings.topic_prefix, request), "default")
    assert sorted(lines_of(ran)) == sorted(["local_first", "local_last", "celery_0", "celery_1", "celery_2"])


def test_scheduler_killed_with_four_celery_tries_running_the_next_adopts_them_and_nothing_reruns(
        settings, system, tmp_path):
    workers, processes, tail = system
    ran = tmp_path / "ran.txt"
    workers.start("host-a", concurrency=4)
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=4, ran=ran, seconds=20, queue="default"))
    first = processes.scheduler("first")
    run_id = trigger(settings, "celery_sleepers")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 4, 60, "4 tries to start")
    kill_hard(first.pid)
    processes.scheduler("second")
    assert tail.run_finished(run_id, 120).state == "success"
    adopted = tail.of_type(TaskAdopted, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.by_scheduler) for event in adopted) == [
        (f"sleep_{index}", 1, "second") for index in range(4)]
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert {event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)} == {1}
    assert sorted(lines_of(ran)) == [f"sleep_{index} 1" for index in range(4)]


def test_a_worker_with_another_default_queue_and_reports_changes_no_adoption(settings, system, tmp_path):
    """The production failure: a worker overwrote the task's queue with its own default queue, and
    the restarted scheduler routed adoption by that column. Here the worker's default queue differs
    from the tasks' queue, and a worker even reports another executor and queue for a try: the
    restarted scheduler still adopts every try on the executor its TaskQueued names."""
    workers, processes, tail = system
    ran = tmp_path / "ran.txt"
    workers.start("host-a", queues="etl", celery_default_queue="kubernetes_default")
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=2, ran=ran, seconds=15, queue="etl"))
    first = processes.scheduler("first")
    run_id = trigger(settings, "celery_sleepers")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 2, 60, "2 tries to start")
    with KafkaEventLog(settings, client_id="test-misreporting-worker") as event_log:
        event_log.append(replace(tail.of_type(TaskStarted, run_id=run_id)[0], executor="kubernetes",
                                 queue="kubernetes_default", at=time.time()))
    kill_hard(first.pid)
    processes.scheduler("second")
    assert tail.run_finished(run_id, 120).state == "success"
    assert {(event.executor, event.queue) for event in tail.of_type(TaskQueued, run_id=run_id)} == {("celery", "etl")}
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskAdopted, run_id=run_id)) == [
        ("sleep_0", 1), ("sleep_1", 1)]
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert sorted(lines_of(ran)) == ["sleep_0 1", "sleep_1 1"]


def test_celery_tries_find_none_of_the_workers_secrets(settings, system, tmp_path, monkeypatch):
    """The worker holds an admin token and a database URL in its settings and a cloud key in its
    environment (as under `tock standalone`); its tries see none of them, anywhere they could look."""
    workers, processes, tail = system
    secrets = Secrets()
    for name, value in secrets.environment.items():
        monkeypatch.setenv(name, value)  # the worker's environment (and the scheduler's)
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "dags").mkdir()
    path = snooping_dag(tmp_path / "dags", out, "celery")
    workers.start("host-a", concurrency=2, **secrets.settings)
    publish_dags(settings, path)
    processes.scheduler("s1")
    run_id = trigger(settings, "snoops")
    assert tail.run_finished(run_id, 90).state == "success", tail.of_type(TaskFailed, run_id=run_id)
    assert {event.executor for event in tail.of_type(TaskStarted, run_id=run_id)} == {"celery"}
    assert_nothing_found(out, secrets)


def test_a_try_delivered_twice_by_celery_runs_its_user_code_once(settings, system, tmp_path):
    """Redis gives an unacknowledged message to a worker again after the visibility timeout (here
    2 s, against a 12 s task): the second delivery's runner loses the claim and runs nothing."""
    workers, processes, tail = system
    ran = tmp_path / "ran.txt"
    for host in ("host-a", "host-b"):
        workers.start(host, concurrency=2, celery_visibility_timeout=2)
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=1, ran=ran, seconds=12, queue="default"))
    processes.scheduler("s1")
    run_id = trigger(settings, "celery_sleepers")
    assert tail.run_finished(run_id, 90).state == "success"
    started = tail.of_type(TaskStarted, run_id=run_id)
    assert len(started) >= 2, "the test did not force a redelivery"
    assert {event.try_number for event in started} == {1}
    assert lines_of(ran) == ["sleep_0 1"]
    handle = tail.of_type(TaskLaunched, run_id=run_id)[0].handle
    received = sum(workers.log_of(host).count(f"tock.run_try[{handle}] received") for host in ("host-a", "host-b"))
    assert received >= 2


def test_a_killed_celery_try_is_revoked_and_its_end_confirmed_through_the_log(settings, system, tmp_path):
    """KillTask of a running Celery try: the scheduler commits TaskKillRequested and revokes the task
    with terminate; whichever reaches the runner first (the log's request, or SIGTERM when its pool
    process is terminated), the user code is gone, the try's end is in the log, and it is not retried."""
    workers, processes, tail = system
    ran = tmp_path / "ran.txt"
    workers.start("host-a")
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=1, ran=ran, seconds=600, queue="default"))
    processes.scheduler("s1")
    run_id = trigger(settings, "celery_sleepers")
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id), 60, "the try to start")
    wait_until(lambda: lines_of(ran), 30, "the user code to start")
    with KafkaEventLog(settings, client_id="test-operator") as event_log:
        event_log.append(KillTask(dag_id="celery_sleepers", run_id=run_id, task_id="sleep_0",
                                  request_id=uuid.uuid4().hex, requested_by="test", at=time.time()))
    assert tail.run_finished(run_id, 60).state == "failed"
    ends = tail.of_type(TaskKilled, run_id=run_id) + tail.of_type(TaskFailed, run_id=run_id)
    assert [(event.task_id, event.try_number) for event in ends] == [("sleep_0", 1)]
    assert len(tail.of_type(TaskKillRequested, run_id=run_id)) == 1
    assert lines_of(ran) == ["sleep_0 1"]
    assert "revoked" in workers.log_of("host-a").lower() or "terminat" in workers.log_of("host-a").lower()
    assert not [process for process in psutil.process_iter(["cmdline"])
                if "sleep 600" in " ".join(process.info["cmdline"] or [])
                and str(tmp_path) in " ".join(process.info["cmdline"] or [])]
