"""Scenarios of the Kubernetes executor: a real kube-apiserver and etcd (the session's), node agents
standing in for kubelets, real schedulers, workers and runners against the real broker."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from infra.log import EventReader, KafkaEventLog, partition_for
from schemas import (
    SCHEDULERS,
    PodFinished,
    PodStarted,
    SchedulerHeartbeat,
    TaskAdopted,
    TaskDeclaredDead,
    TaskFailed,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.celery_support import Workers, lines_of, pids_alive
from tests.scenarios.kube_support import Agents, kube_settings, pods
from tests.scenarios.scheduler_support import (
    REPO,
    LogTail,
    Processes,
    create_topics,
    environment,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)

pytestmark = pytest.mark.scenario

MIXED = '''
from tock import DAG, BashTask

with DAG("mixed") as dag:
    first = BashTask("local_task", 'echo "$TOCKRUN_TASK_ID" >> {ran}')
    middle = BashTask("celery_task", 'echo "$TOCKRUN_TASK_ID" >> {ran}', executor="celery")
    last = BashTask("pod_task", 'echo "$TOCKRUN_TASK_ID" >> {ran}', executor="kubernetes")
    first >> middle >> last
'''

SLEEPERS = '''
from tock import DAG, BashTask

for dag_index in range({dags}):
    with DAG(f"pods_{{dag_index}}", retries=1, retry_delay=0) as dag:
        for index in range({count}):
            BashTask(f"sleep_{{index}}", 'echo "$TOCKRUN_DAG_ID.$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER $$" >> {ran}; '
                     'sleep {seconds}', executor="kubernetes", queue="{queue}")
'''

GATED = '''
from tock import DAG, BashTask

for dag_index in range({dags}):
    with DAG(f"pods_{{dag_index}}", retries=1, retry_delay=0) as dag:
        BashTask("sleep_0", 'echo "$TOCKRUN_DAG_ID.$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER $$" >> {ran}; '
                 'until [ -e {gate} ]; do sleep 0.2; done', executor="kubernetes", queue="pods")
'''


@pytest.fixture
def system(tmp_path):
    """Collects the test's processes; all stopped at its end (agents last: pods outlive schedulers)."""
    parts = {}
    yield parts
    for name in ("processes", "workers", "agents", "tail"):
        if name in parts:
            parts[name].close()


def start(system, settings, tmp_path):
    create_topics(settings)
    system["agents"] = Agents(settings, tmp_path / "nodes")
    system["processes"] = Processes(settings, tmp_path / "logs")
    system["tail"] = LogTail(settings)
    return system["agents"], system["processes"], system["tail"]


def dag_file(tmp_path, source: str, **values):
    path = tmp_path / "dags" / "dag.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source.format(**values))
    return path


def test_a_dag_with_local_celery_and_kubernetes_tasks_succeeds(make_settings, kube_namespace, redis_url, system,
                                                              tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    agents, processes, tail = start(system, settings, tmp_path)
    system["workers"] = workers = Workers(settings, tmp_path / "hosts")
    ran = tmp_path / "ran.txt"
    agents.start("node-a")
    workers.start("host-a")
    publish_dags(settings, dag_file(tmp_path, MIXED, ran=ran))
    processes.scheduler("s1")
    run_id = trigger(settings, "mixed")
    assert tail.run_finished(run_id, 120).state == "success"
    started = {event.task_id: (event.executor, event.hostname) for event in tail.of_type(TaskStarted, run_id=run_id)}
    assert started == {"local_task": ("local", settings.host), "celery_task": ("celery", "host-a"),
                       "pod_task": ("kubernetes", "node-a")}
    # Each runner names its own handle as its executor's launch named it (what adopts a try whose
    # TaskLaunched was never committed): the local runner's process, the Celery task id, the pod name.
    handles = {event.task_id: event.handle for event in tail.of_type(TaskLaunched, run_id=run_id)}
    assert {event.task_id: event.handle for event in tail.of_type(TaskStarted, run_id=run_id)} == handles
    [launched] = [event for event in tail.of_type(TaskLaunched, run_id=run_id) if event.executor == "kubernetes"]
    [pod_started] = tail.of_type(PodStarted, run_id=run_id)
    assert (pod_started.pod_name, pod_started.node) == (launched.handle, "node-a")
    assert lines_of(ran) == ["local_task", "celery_task", "pod_task"]
    wait_until(lambda: not pods(settings), 30, "the finished pod to be deleted")


def test_scheduler_killed_with_tries_in_pods_the_next_adopts_every_pod(make_settings, kube_namespace, redis_url,
                                                                       system, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5,
                             task_heartbeat_timeout=15, scheduler_session_timeout=6)
    agents, processes, tail = start(system, settings, tmp_path)
    ran = tmp_path / "ran.txt"
    agents.start("node-a")
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, dags=1, count=3, ran=ran, seconds=15, queue="pods"))
    first = processes.scheduler("first")
    run_id = trigger(settings, "pods_0")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 3, 90, "3 tries to start")
    uids_before = {pod.metadata.name: pod.metadata.uid for pod in pods(settings)}
    with KafkaEventLog(settings, client_id="test-misreporting-runner") as event_log:  # says another queue
        event_log.append(replace(tail.of_type(TaskStarted, run_id=run_id)[0], queue="default", at=time.time()))
    kill_hard(first.pid)
    processes.scheduler("second")
    assert tail.run_finished(run_id, 120).state == "success"

    adopted = tail.of_type(TaskAdopted, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.by_scheduler) for event in adopted) == [
        (f"sleep_{index}", 1, "second") for index in range(3)]
    assert {event.handle for event in adopted} == set(uids_before)
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert len(tail.of_type(TaskLaunched, run_id=run_id)) == 3  # no pod created twice
    assert {event.pod_uid for event in tail.of_type(PodFinished, run_id=run_id)} <= set(uids_before.values())
    assert {(event.executor, event.queue) for event in tail.of_type(TaskQueued, run_id=run_id)} == {
        ("kubernetes", "pods")}
    assert sorted(line.rsplit(" ", 1)[0] for line in lines_of(ran)) == [
        f"pods_0.sleep_{index} 1" for index in range(3)]


@pytest.mark.timeout(900)
def test_two_schedulers_one_killed_the_survivor_adopts_only_its_partitions_then_nothing_leaks(
        make_settings, kube_namespace, redis_url, system, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5,
                             task_heartbeat_timeout=20, scheduler_session_timeout=6)
    agents, processes, tail = start(system, settings, tmp_path)
    ran = tmp_path / "ran.txt"
    agents.start("node-a")
    agents.start("node-b")
    gate = tmp_path / "gate"  # the tries run until the test opens it: none can end before the takeover
    publish_dags(settings, dag_file(tmp_path, GATED, dags=6, ran=ran, gate=gate))
    survivor, doomed = processes.scheduler("survivor"), processes.scheduler("doomed")
    owners = settled_ownership(settings, {"survivor", "doomed"})
    doomed_dags = {f"pods_{index}" for index in range(6)
                   if partition_for(f"pods_{index}", settings.partitions) in owners["doomed"]}
    assert doomed_dags and len(doomed_dags) < 6, "both schedulers should own some of the DAGs"
    run_ids = {f"pods_{index}": trigger(settings, f"pods_{index}") for index in range(6)}
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted)) >= 6, 120, "6 tries to start")
    killed_at = time.time()
    kill_hard(doomed.pid)
    tail.wait_for(lambda _events: {event.dag_id for event in tail.of_type(TaskAdopted)} >= doomed_dags, 120,
                  "the survivor to adopt the doomed scheduler's tries")
    gate.touch()
    for run_id in run_ids.values():
        assert tail.run_finished(run_id, 120).state == "success"
    adopted = [event for event in tail.of_type(TaskAdopted) if event.at >= killed_at]
    assert {(event.by_scheduler, event.from_scheduler) for event in adopted} == {("survivor", "doomed")}
    assert {event.dag_id for event in adopted} == doomed_dags
    assert tail.of_type(TaskDeclaredDead) == []
    assert survivor.poll() is None

    many = tmp_path / "dags" / "many.py"
    many.write_text("from tock import DAG, BashTask\nwith DAG('many') as dag:\n"
                    "    for index in range(200):\n        BashTask(f't{index}', 'true', executor='kubernetes')\n")
    publish_dags(settings, many)
    run_id = trigger(settings, "many")
    assert tail.run_finished(run_id, 600).state == "success"
    succeeded = tail.of_type(TaskSucceeded, run_id=run_id)
    assert len(succeeded) == 200 and {event.try_number for event in succeeded} == {1}
    wait_until(lambda: not pods(settings), 120, "every finished pod to be deleted")
    # The running count is a fold of the log: once the projector has folded the run's end, it is 0.
    processes.start("projector", name="projector")
    wait_until(lambda: run_state(settings, "many", run_id) == "success", 120, "the projector to fold the run")
    counts = executor_status(settings, "kubernetes")
    assert (counts["running"], counts["queued"]) == (0, 0)


def test_a_pod_over_its_memory_limit_is_oom_killed_and_its_retry_succeeds(make_settings, kube_namespace,
                                                                        redis_url, system, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    agents, processes, tail = start(system, settings, tmp_path)
    agents.start("node-a")
    path = dag_file(tmp_path, '''
import os
from tock import DAG, task

with DAG("hungry", retries=1, retry_delay=0) as dag:
    @task(executor="kubernetes", pod_override={{"resources": {{"limits": {{"memory": "200Mi"}}}}}})
    def eat():
        megabytes = 600 if os.environ["TOCKRUN_TRY_NUMBER"] == "1" else 10
        block = bytearray(megabytes * 1024 * 1024)
        for offset in range(0, len(block), 4096):
            block[offset] = 1
    eat()
''')
    publish_dags(settings, path)
    processes.scheduler("s1")
    run_id = trigger(settings, "hungry")
    assert tail.run_finished(run_id, 120).state == "success"
    [failure] = tail.of_type(TaskFailed, run_id=run_id)
    assert failure.try_number == 1 and "OOMKilled" in failure.error and "137" in failure.error
    [finished_1] = [event for event in tail.of_type(PodFinished, run_id=run_id) if event.try_number == 1]
    assert (finished_1.phase, finished_1.reason, finished_1.exit_code) == ("Failed", "OOMKilled", 137)
    assert [event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)] == [2]


def test_a_node_agent_killed_its_tries_die_and_run_again_on_another_node(make_settings, kube_namespace, redis_url,
                                                                          system, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5,
                             task_heartbeat_timeout=8)
    agents, processes, tail = start(system, settings, tmp_path)
    ran = tmp_path / "ran.txt"
    agents.start("node-a")
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, dags=1, count=2, ran=ran, seconds=30, queue="pods"))
    processes.scheduler("s1")
    run_id = trigger(settings, "pods_0")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 2, 90, "2 tries to start")
    wait_until(lambda: len(lines_of(ran)) >= 2, 30, "the user code of 2 tries")
    first_pids = [int(line.split()[2]) for line in lines_of(ran)]
    agents.start("node-b")
    agents.kill_hard("node-a")
    wait_until(lambda: not pids_alive(first_pids), 15, "the lost node's tries to die")
    assert tail.run_finished(run_id, 180).state == "success"
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskDeclaredDead, run_id=run_id)) == [
        ("sleep_0", 1), ("sleep_1", 1)]
    retried = [event for event in tail.of_type(TaskStarted, run_id=run_id) if event.try_number == 2]
    retried_on = sorted((event.task_id, event.hostname) for event in retried)
    assert retried_on == [("sleep_0", "node-b"), ("sleep_1", "node-b")]
    assert sorted(line.rsplit(" ", 1)[0] for line in lines_of(ran)) == sorted(
        f"pods_0.sleep_{index} {number}" for index in range(2) for number in (1, 2))


def test_the_api_server_restarted_mid_run_loses_no_pod_end_and_runs_nothing_twice(
        make_settings, kube_namespace, kube_cluster, redis_url, system, tmp_path):
    from infra.kube import LocalKube

    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    agents, processes, tail = start(system, settings, tmp_path)
    ran = tmp_path / "ran.txt"
    agents.start("node-a")
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, dags=1, count=3, ran=ran, seconds=8, queue="pods"))
    processes.scheduler("s1")
    run_id = trigger(settings, "pods_0")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 3, 90, "3 tries to start")

    control_plane = LocalKube(kube_cluster)
    control_plane.apiserver.stop(30)
    time.sleep(10)  # the outage: the tries end while the API server is away (part of the scenario)
    control_plane.start(with_agent=False)

    assert tail.run_finished(run_id, 180).state == "success"
    finished = tail.of_type(PodFinished, run_id=run_id)
    assert sorted(event.task_id for event in finished) == [f"sleep_{index}" for index in range(3)]
    assert {event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)} == {1}
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert sorted(line.rsplit(" ", 1)[0] for line in lines_of(ran)) == [
        f"pods_0.sleep_{index} 1" for index in range(3)]
    wait_until(lambda: not pods(settings), 60, "the finished pods to be deleted")


def settled_ownership(settings, schedulers: set[str], timeout: float = 60.0) -> dict[str, set[int]]:
    """The partitions each scheduler owns once every partition is owned by exactly one of them,
    as their latest SchedulerHeartbeats say."""
    reader = EventReader(settings, [], client_id="test-schedulers")
    reader.assign([(SCHEDULERS, partition, 0) for partition in range(settings.partitions)])
    latest: dict[str, set[int]] = {}
    try:
        def settled():
            for record in reader.poll(0.2):
                if isinstance(record.event, SchedulerHeartbeat):
                    latest[record.event.scheduler_id] = set(record.event.partitions)
            owned = [latest.get(name, set()) for name in schedulers]
            everything = set().union(*owned)
            return (all(owned) and sum(map(len, owned)) == len(everything) == settings.partitions
                    and {name: latest[name] for name in schedulers})
        return wait_until(settled, timeout, "the two schedulers to share the partitions")
    finally:
        reader.close()


def tock_json(settings, *arguments: str):
    result = subprocess.run([sys.executable, "-m", "tock_cli", *arguments, "--json"], env=environment(settings),
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def run_state(settings, dag_id: str, run_id: str) -> str | None:
    return next((run["state"] for run in tock_json(settings, "runs", "list", dag_id) if run["run_id"] == run_id), None)


def executor_status(settings, executor: str) -> dict:
    found = tock_json(settings, "executors", "status", executor)
    return next(entry for entry in (found if isinstance(found, list) else [found]) if entry["executor"] == executor)
