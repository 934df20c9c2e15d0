"""Kubernetes executor benchmarks, against the real kube-apiserver and etcd (a control plane of the
bench's own, on free ports, under a temporary home).

K-takeover (synthetic pods): 500 pods of one partition, created through the API with the
   executor's own manifests and set Running by the bench acting as their kubelet (no processes
   run them), and the log a killed scheduler "old" left for them (written by the bench). A
   Scheduler thread takes the partition over: time from its assignment to the last TaskAdopted,
   and the API requests its Kubernetes executor made for it (the goal: one list, not one
   request per pod).
K-W1: 200 no-op Kubernetes tasks run for real by two node agents (the kubelet stand-in: each
   pod is a `tock run-task` process): trigger acknowledged -> run success, and the API server's
   own count of requests (apiserver_request_total, from its /metrics) per try, all clients.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from kubernetes import client as kube

from infra.executors.kubernetes import KubernetesExecutor, pod_manifest
from infra.executors.requests import TryRequest
from infra.kube import LocalKube
from infra.kube_client import ensure_namespace, kube_api
from infra.log import KafkaEventLog
from infra.settings import Settings
from schemas import DagRunCreated, TaskAdopted, TaskLaunched, TaskQueued, TaskStarted
from services.scheduler.shell import Scheduler
from tests.benchmarks.common import REPO, bench_settings, figure, timed_run
from tests.benchmarks.w3_takeover import drop_topics, load
from tests.ports import free_port, free_ports
from tests.scenarios.scheduler_support import LogTail, environment, publish_dags

PODS = 500
FAN_OUT = 200



def control_plane(tmp: Path) -> tuple[LocalKube, Path]:
    settings = Settings(home=tmp / "kube-home", kube_apiserver_port=(apiserver := free_port()),
                        kube_etcd_port=free_ports(2, apiserver))
    local = LocalKube(settings)
    local.start(with_agent=False)
    return local, settings.resolved_kubeconfig


def with_kube(settings: Settings, kubeconfig: Path) -> Settings:
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    settings = settings.model_copy(update={"kubeconfig": kubeconfig, "kube_namespace": namespace,
                                           "executors": "local,celery,kubernetes"})
    with kube_api(settings) as api:
        ensure_namespace(api, namespace)
    return settings


# -- K-takeover (synthetic pods) ---------------------------------------------------------------

def bench_takeover(tmp: Path, kubeconfig: Path) -> None:
    settings = with_kube(bench_settings(tmp / "takeover", partitions=1, task_heartbeat_timeout=600), kubeconfig)
    dag_path = tmp / "takeover.py"
    dag_path.write_text("from tock import DAG, BashTask\nwith DAG('takeover') as dag:\n" + "".join(
        f"    BashTask('task_{index:04d}', 'sleep 600', executor='kubernetes')\n" for index in range(PODS)))
    [dag_id] = publish_dags(settings, dag_path)
    run_id, now = "manual__takeover", time.time()
    requests = [TryRequest(dag_id, run_id, f"task_{index:04d}", 1, str(dag_path), None, now) for index in range(PODS)]
    handles = running_pods(settings, requests)
    old_owners_log(settings, requests, handles, now)
    executor = KubernetesExecutor(settings)
    scheduler = Scheduler(settings, {"kubernetes": executor}, scheduler_id="new")
    thread, tail = threading.Thread(target=scheduler.run), LogTail(settings)
    thread.start()
    try:
        tail.wait_for(lambda _events: len(tail.of_type(TaskAdopted, run_id=run_id)) >= PODS, 120, "adoption")
        adopted_at = max(event.at for event in tail.of_type(TaskAdopted, run_id=run_id))
        figure(f"K-takeover (synthetic pods): assignment -> {PODS} pods adopted", adopted_at - scheduler.assigned_at[0],
               "s", "<= 3 s")
        figure("K-takeover: API requests by the executor for the takeover", executor.watcher.requests_made,
               "requests", "1 list (+ the watch it opens)")
        print(f"     (synthetic: {PODS} real pods in the real API server, set Running by the bench, no processes; "
              "the killed\n      scheduler's log written by the bench; a Scheduler thread in the bench's process; "
              f"{load()})", flush=True)
    finally:
        scheduler.stop()
        thread.join(60)
        tail.close()
        drop_topics(settings)


def running_pods(settings: Settings, requests: list[TryRequest]) -> list[str]:
    """Create each try's pod with the executor's manifest; as its kubelet, bind it and say it runs."""
    with kube_api(settings) as api:
        core = kube.CoreV1Api(api)
        names = []
        for request in requests:
            body = pod_manifest(settings, request, "default", {})
            body["spec"]["nodeName"] = "bench-node"
            pod = core.create_namespaced_pod(settings.kube_namespace, body)
            core.patch_namespaced_pod_status(pod.metadata.name, settings.kube_namespace, {"status": {
                "phase": "Running", "containerStatuses": [{
                    "name": "try", "image": settings.kube_image, "imageID": "", "ready": True, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
            names.append(pod.metadata.name)
    return names


def old_owners_log(settings: Settings, requests: list[TryRequest], handles: list[str], now: float) -> None:
    with KafkaEventLog(settings, client_id="bench-old") as event_log:
        event_log.append(DagRunCreated(dag_id=requests[0].dag_id, run_id=requests[0].run_id, logical_date=now,
                                       run_type="manual", dag_fingerprint="fp", scheduler_id="old", at=now))
        for request, handle in zip(requests, handles, strict=False):
            ids = {"dag_id": request.dag_id, "run_id": request.run_id, "task_id": request.task_id, "try_number": 1}
            event_log.append(TaskQueued(**ids, executor="kubernetes", queue="default", scheduler_id="old", at=now))
            event_log.append(TaskLaunched(**ids, executor="kubernetes", handle=handle, scheduler_id="old",
                                          queue="default", at=now))
            event_log.append(TaskStarted(**ids, runner_id="r", hostname="bench-node", pid=1, at=now))


# -- K-W1: real pods on two node agents ----------------------------------------------------------

def bench_w1(tmp: Path, kubeconfig: Path) -> None:
    settings = with_kube(bench_settings(tmp / "w1", partitions=12, task_heartbeat_seconds=5), kubeconfig)
    dag_path = tmp / "fan_out.py"
    dag_path.write_text("from tock import DAG, BashTask\nwith DAG('k_fan_out') as dag:\n" + "".join(
        f"    BashTask('noop_{index:03d}', 'true', executor='kubernetes')\n" for index in range(FAN_OUT)))
    warm = tmp / "warm.py"
    warm.write_text("from tock import DAG, BashTask\nwith DAG('k_warm') as dag:\n"
                    "    BashTask('noop', 'true', executor='kubernetes')\n")
    processes, tail = [], LogTail(settings)
    try:
        processes += [start(settings, tmp, "node-agent", "--node", node) for node in ("bench-a", "bench-b")]
        publish_dags(settings, dag_path)
        publish_dags(settings, warm)
        processes.append(start(settings, tmp, "scheduler", "--id", "bench"))
        timed_run(settings, tail, "k_warm")
        before = api_requests(settings)
        seconds, run_id = timed_run(settings, tail, "k_fan_out")
        requests = api_requests(settings) - before
        figure(f"K-W1: {FAN_OUT} no-op pods, 2 node agents: trigger acked -> success", seconds, "s")
        figure("K-W1: API server requests per try (every client: scheduler, agents)", requests / FAN_OUT, "requests")
        print(f"     (each pod is a real `tock run-task` process started by a node agent, the kubelet stand-in; "
              f"{load()})", flush=True)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
        tail.close()
        drop_topics(settings)


def start(settings: Settings, tmp: Path, *command: str) -> subprocess.Popen:
    name = "-".join(command[:3]).replace("/", "_")
    home = tmp / "homes" / name
    home.mkdir(parents=True, exist_ok=True)
    env = {**environment(settings.model_copy(update={"home": home})), "PYTHONPATH": str(REPO)}
    with open(tmp / f"{name}.log", "ab") as output:
        process = subprocess.Popen([sys.executable, "-m", "tock_cli", *command], env=env, stdout=output,
                                   stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    if command[0] == "node-agent":
        wait_for_node(settings, command[-1])
    return process


def wait_for_node(settings: Settings, node: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    with kube_api(settings) as api:
        while True:
            try:
                kube.CoreV1Api(api).read_node(node)
                return
            except kube.ApiException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def api_requests(settings: Settings) -> float:
    """The API server's count of requests it served (apiserver_request_total, summed)."""
    with kube_api(settings) as api:
        method, url, headers, body, _post = api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"])
        response = api.call_api(method, url, header_params=headers, body=body)
        response.read()
        text = response.data.decode()
    return sum(float(match) for match in re.findall(r"^apiserver_request_total\{[^}]*\} (\S+)$", text, re.M))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tock-bench-kube-") as folder:
        tmp = Path(folder)
        local, kubeconfig = control_plane(tmp)
        try:
            bench_takeover(tmp, kubeconfig)
            bench_w1(tmp, kubeconfig)
        finally:
            local.stop()


if __name__ == "__main__":
    os.environ.pop("TOCK_KUBECONFIG", None)
    main()
