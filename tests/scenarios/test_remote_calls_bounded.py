"""Nothing on the scheduler's main loop waits on a remote call without a bound (issue 20, defect 11).

A stalled Kubernetes API server (its kube-apiserver frozen with SIGSTOP: connections accepted,
never answered) and a Redis that is away (stopped) must cost the scheduler's other tries nothing:
while pods are being created, deleted or listed and Celery tries revoked, a DAG of local tasks
owned by the same scheduler keeps being decided, launched and finished. Both faults are real and
private to the test (its own control plane, its own Redis), so no other test sees them.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from infra.executors.kubernetes import KubernetesExecutor
from infra.executors.requests import TryRequest
from schemas import KillTask, TaskKillRequested, TaskLaunched
from tests.integration.node_agent_support import private_kube, private_namespace  # noqa: F401
from tests.scenarios.celery_support import PrivateRedis
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario

LOCAL_CHAIN = '''
from tock import DAG, BashTask

with DAG("local_chain") as dag:
    BashTask("one", "true") >> BashTask("two", "true") >> BashTask("three", "true")
'''

PODS = '''
from tock import DAG, BashTask

with DAG("pods") as dag:
    for index in range(4):
        BashTask(f"pod_{index}", "true", executor="kubernetes")
'''

CELERY_MANY = '''
from tock import DAG, BashTask

with DAG("celery_many") as dag:
    for index in range({count}):
        BashTask(f"c_{{index}}", "sleep 600", executor="celery")
'''


def _dags(tmp_path, **sources: str):
    folder = tmp_path / "dags"
    folder.mkdir(exist_ok=True)
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def _local_run_seconds(settings, tail: LogTail, timeout: float) -> float:
    """How long a run of the local chain takes from its trigger to its end."""
    began = time.monotonic()
    run_id = trigger(settings, "local_chain")
    assert tail.run_finished(run_id, timeout).state == "success"
    return time.monotonic() - began


@pytest.mark.timeout(300)
def test_a_stalled_api_server_never_stops_the_scheduler_s_local_tries(make_settings, private_kube,  # noqa: F811
                                                                     private_namespace, tmp_path):  # noqa: F811
    settings = make_settings(**private_namespace.overrides, executors="local,kubernetes",
                             task_heartbeat_seconds=0.5, kube_request_timeout=3)
    create_topics(settings)
    folder = _dags(tmp_path, local_chain=LOCAL_CHAIN, pods=PODS)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    apiserver = private_kube.apiserver.live_pid()
    try:
        for path in sorted(folder.iterdir()):
            publish_dags(settings, path)
        processes.scheduler("only")
        _local_run_seconds(settings, tail, 60)  # the scheduler owns everything and decides
        os.kill(apiserver, signal.SIGSTOP)  # connections accepted, never answered
        trigger(settings, "pods")  # its pods' creates now wait on the frozen API server
        time.sleep(1.0)
        took = _local_run_seconds(settings, tail, 45)
        assert took < 20, f"the local chain took {took:.1f} s while the API server hung"
        took = _local_run_seconds(settings, tail, 45)
        assert took < 20, f"the local chain took {took:.1f} s while the API server hung"
    finally:
        os.kill(apiserver, signal.SIGCONT)
        processes.close()
        tail.close()


@pytest.mark.timeout(300)
def test_revokes_while_redis_is_away_never_stop_the_scheduler_s_local_tries(make_settings, tmp_path):
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    count = 12
    settings = make_settings(celery_broker_url=redis.url, executors="local,celery", task_heartbeat_seconds=0.5)
    create_topics(settings)
    folder = _dags(tmp_path, local_chain=LOCAL_CHAIN, celery_many=CELERY_MANY.format(count=count))
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        for path in sorted(folder.iterdir()):
            publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "celery_many")  # no worker: the tries wait in Redis, launched
        tail.wait_for(lambda _events: len(tail.of_type(TaskLaunched, run_id=run_id)) == count, 60,
                      "every Celery try to be sent")
        _local_run_seconds(settings, tail, 60)
        redis.stop()
        event_log = shared_event_log(settings)
        for index in range(count):  # an operator kills the whole run: a revoke per try, Redis away
            event_log.append(KillTask(dag_id="celery_many", run_id=run_id, task_id=f"c_{index}",
                                      request_id=uuid.uuid4().hex, requested_by="test", at=time.time()))
        event_log.flush()
        tail.wait_for(lambda _events: len(tail.of_type(TaskKillRequested, run_id=run_id)) == count, 60,
                      "the kill requests to commit")
        took = _local_run_seconds(settings, tail, 90)
        assert took < 10, f"the local chain took {took:.1f} s while {count} revokes waited on Redis"
    finally:
        processes.close()
        tail.close()
        redis.stop() if redis.running() else None


@pytest.mark.timeout(120)
def test_the_kubernetes_executor_s_calls_answer_within_the_timeout_while_the_api_server_hangs(
        make_settings, private_kube, private_namespace):  # noqa: F811
    settings = make_settings(**private_namespace.overrides, executors="local,kubernetes", kube_request_timeout=2)
    executor = KubernetesExecutor(settings)
    apiserver = private_kube.apiserver.live_pid()
    request = TryRequest("hung", "r1", "t", 1, "/dags/hung.py", None, time.time(), None)
    os.kill(apiserver, signal.SIGSTOP)
    try:
        began = time.monotonic()
        executor.watch([0, 1])  # lists in the background: never waits on the API server here
        assert time.monotonic() - began < 0.5
        began = time.monotonic()
        assert executor.kill("tock-hung-t-1-0000000000") is False  # asked again later
        assert time.monotonic() - began < 2 * 2 + 1  # the request and its one retry
        began = time.monotonic()
        assert list(executor.launch_many([(request, "default")])) in ([], [None])  # stays queued
        assert time.monotonic() - began < 2 + 1  # the launch's own bound
    finally:
        os.kill(apiserver, signal.SIGCONT)
        executor.close()
