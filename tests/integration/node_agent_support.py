"""Node agents as real processes for the node agent's tests, on a real kube-apiserver.

A test runs in its own namespace (``kube_target``) of the session's shared API server
(``kube_cluster`` / ``kube_namespace`` of tests/conftest.py). Tests that stop or freeze the
API server override ``kube_target`` with ``private_namespace``: a namespace of a control plane
of the module's own (``private_kube``, infra/kube's ``LocalKube``), so no fault reaches the
shared server.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infra.kube import LocalKube
from infra.kube.agent import agent_environment
from infra.kube_client import ensure_namespace, kube_api
from infra.settings import Settings
from tests.conftest import REPO, KubeTarget, _kube_session_settings

LEASE_NAMESPACE = "kube-node-lease"


def wait_for(condition: Callable[[], object], seconds: float, what: str, every: float = 0.1):
    """The condition's first truthy value, or a failure naming what did not happen in time."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(every)


@dataclass
class AgentProcess:
    """``tock node-agent --node NAME`` as a real process."""

    node: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> int:
        """SIGTERM (a clean stop) and its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def start_agent(node: str, settings: Settings) -> AgentProcess:
    """An agent for ``node`` with exactly ``settings`` (its files and log under ``settings.home``)."""
    settings.home.mkdir(parents=True, exist_ok=True)
    log = settings.home / f"agent-{node}-{uuid.uuid4().hex[:6]}.log"
    with open(log, "ab") as output:
        process = subprocess.Popen([sys.executable, "-m", "tock_cli", "node-agent", "--node", node,
                                    "--lease-seconds", "1"],
                                   env=agent_environment(settings), stdout=output, stderr=output, cwd=REPO)
    wait_for(lambda: process.poll() is not None or "registered" in log.read_text(), 30, f"agent {node} to start")
    assert process.poll() is None, f"agent {node} exited at start:\n{log.read_text()[-3000:]}"
    return AgentProcess(node, process, log)


@pytest.fixture
def kube_target(kube_namespace: KubeTarget) -> KubeTarget:
    """Where the test's pods and agents go: its namespace of the session's API server."""
    return kube_namespace


@pytest.fixture
def namespace(kube_target: KubeTarget) -> str:
    return kube_target.namespace


@pytest.fixture
def kube_settings(make_settings, kube_target: KubeTarget) -> Settings:
    """The test's settings, pointed at its kubeconfig and namespace."""
    return make_settings(**kube_target.overrides)


@pytest.fixture
def kube_core(kube_settings: Settings) -> Iterator[client.CoreV1Api]:
    """A CoreV1Api on the test's API server."""
    with kube_api(kube_settings) as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def agents(make_settings, kube_target: KubeTarget, kube_settings: Settings, tmp_path: Path):
    """Start agents with ``agents(node)`` (home ``tmp_path / node`` unless given); whatever still
    runs at the end is killed (its pods with it), and its Node and Lease are deleted, as those
    are cluster-wide, not the test's namespace's."""
    started: list[AgentProcess] = []

    def start(node: str, home: Path | None = None) -> AgentProcess:
        settings = make_settings(**kube_target.overrides, home=home or tmp_path / node)
        started.append(start_agent(node, settings))
        return started[-1]

    yield start
    for agent in started:
        if agent.process.poll() is None:
            agent.kill()
    _forget_nodes(kube_settings, {agent.node for agent in started})


def _forget_nodes(settings: Settings, nodes: set[str]) -> None:
    with kube_api(settings) as api:
        core, leases = client.CoreV1Api(api), client.CoordinationV1Api(api)
        for node in nodes:
            for delete in (lambda node=node: core.delete_node(node),
                           lambda node=node: leases.delete_namespaced_lease(node, LEASE_NAMESPACE)):
                try:
                    delete()
                except ApiException as error:
                    if error.status != 404:
                        raise


@pytest.fixture(scope="module")
def private_kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKube]:
    """A control plane of the module's own (free ports, its own home), for tests that stop or
    freeze its API server; stopped at the end of the module."""
    local = LocalKube(_kube_session_settings(tmp_path_factory.mktemp("private-kube")))
    try:
        local.start(with_agent=False)
        yield local
    finally:
        local.stop()


@pytest.fixture
def private_namespace(private_kube: LocalKube) -> KubeTarget:
    """A fresh namespace of the private control plane (gone with it: no deletion needed)."""
    target = KubeTarget(private_kube.settings.resolved_kubeconfig, f"t-{uuid.uuid4().hex[:12]}")
    with kube_api(private_kube.settings) as api:
        ensure_namespace(api, target.namespace)
    return target
