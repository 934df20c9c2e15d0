"""Helpers for the Kubernetes scenarios: node agents (the kubelet stand-in) as real processes, each
a node of the session's real API server, and reading pods back through the official client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kubernetes import client as kube

from infra.kube_client import kube_api
from infra.settings import Settings
from tests.scenarios.scheduler_support import REPO, LogTail, Processes, create_topics, environment, wait_until


class Agents:
    """`tock node-agent` processes, one per node; every one left is stopped at the end."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings, self.root = settings, root
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, node: str) -> subprocess.Popen:
        settings = self.settings.model_copy(update={"home": self.root / node})
        settings.home.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"agent-{node}.log", "ab") as output:
            process = subprocess.Popen([sys.executable, "-m", "tock_cli", "node-agent", "--node", node],
                                       env=environment(settings), stdout=output, stderr=subprocess.STDOUT,
                                       cwd=REPO, start_new_session=True)
        self.started[node] = process
        wait_until(lambda: node_ready(self.settings, node) or process.poll() is not None, 60, f"node {node} ready")
        assert process.poll() is None, f"agent {node} exited: {self.log_of(node)[-2000:]}"
        return process

    def kill_hard(self, node: str) -> None:
        """kill -9 of the agent alone (a lost node): its watcher takes its pods' processes down."""
        os.kill(self.started[node].pid, signal.SIGKILL)
        self.started[node].wait(10)

    def log_of(self, node: str) -> str:
        path = self.root / f"agent-{node}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def node_ready(settings: Settings, node: str) -> bool:
    with kube_api(settings) as api:
        try:
            found = kube.CoreV1Api(api).read_node(node)
        except kube.ApiException:
            return False
    return any(condition.type == "Ready" and condition.status == "True"
               for condition in found.status.conditions or [])


def pods(settings: Settings) -> list[kube.V1Pod]:
    """The pods in the test's namespace now."""
    with kube_api(settings) as api:
        return kube.CoreV1Api(api).list_namespaced_pod(settings.kube_namespace).items


def kube_settings(make_settings, kube_namespace, redis_url: str, **overrides) -> Settings:
    """Settings of a Kubernetes scenario: the session's API server, the test's namespace, every executor."""
    return make_settings(**kube_namespace.overrides, celery_broker_url=redis_url,
                         executors="local,celery,kubernetes", **overrides)


def on_every_executor(settings: Settings, system: dict, tmp_path: Path) -> LogTail:
    """The topics, a node agent (node-a), a Celery worker (host-a), the processes and a log tail, each kept
    in ``system`` (closed by the test's fixture); returns the tail."""
    from tests.scenarios.celery_support import Workers

    create_topics(settings)
    system["agents"], system["workers"] = Agents(settings, tmp_path / "nodes"), Workers(settings, tmp_path / "hosts")
    system["processes"], system["tail"] = Processes(settings, tmp_path / "logs"), LogTail(settings)
    system["agents"].start("node-a")
    system["workers"].start("host-a")
    return system["tail"]
