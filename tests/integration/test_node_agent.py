"""``tock node-agent`` (the kubelet stand-in) against a real kube-apiserver, as real processes.

Each test has its own namespace of the session's shared API server, except those that stop or
freeze the API server: they run against a private control plane (``TestWhileTheApiServerIsAway``).
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import psutil
import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from infra.kube_client import kube_api
from tests.integration.node_agent_support import (  # noqa: F401
    agents,
    kube_core,
    kube_settings,
    kube_target,
    namespace,
    private_kube,
    private_namespace,
    wait_for,
)

pytestmark = pytest.mark.integration


def node_name() -> str:
    return f"node-{uuid.uuid4().hex[:6]}"


def make_pod(core, namespace: str, name: str, command: list[str], memory: str | None = None,
             node: str | None = None, grace: int = 30) -> None:
    container = {"name": "main", "image": "tock:latest", "command": command,
                 "env": [{"name": "GREETING", "value": "hello"}]}
    if memory:
        container["resources"] = {"limits": {"memory": memory}}
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace, "containers": [container]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                           "spec": spec})


def pod_in_phase(core, namespace: str, name: str, *phases: str, seconds: float = 30):
    return wait_for(lambda: _pod_if(core.read_namespaced_pod(name, namespace), phases), seconds,
                    f"pod {name} to be {' or '.join(phases)}")


def _pod_if(pod, phases):
    return pod if pod.status.phase in phases else None


def terminated(pod):
    return pod.status.container_statuses[0].state.terminated


def shim_pid(pod) -> int:
    return int(pod.status.container_statuses[0].container_id.rsplit("/", 1)[1])


def phases_since(core, namespace: str, version: str) -> list[str]:
    """Every distinct phase the namespace's pods went through since ``version`` (the watch replays)."""
    phases = []
    for event in watch.Watch().stream(core.list_namespaced_pod, namespace, resource_version=version,
                                      timeout_seconds=1):
        if not phases or phases[-1] != event["object"].status.phase:
            phases.append(event["object"].status.phase)
    return phases


def gone(core, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        return error.status == 404
    return False


def test_a_pod_that_exits_0_succeeds_through_running_with_a_full_status(kube_core, namespace, agents, tmp_path):
    node = node_name()
    agents(node)
    since = kube_core.list_namespaced_pod(namespace).metadata.resource_version
    make_pod(kube_core, namespace, "hi", ["sh", "-c", 'echo hi $GREETING $TOCK_HOSTNAME; exit 0'])
    pod = pod_in_phase(kube_core, namespace, "hi", "Succeeded")
    assert phases_since(kube_core, namespace, since) == ["Pending", "Running", "Succeeded"]
    state, status = terminated(pod), pod.status
    assert (state.exit_code, state.reason) == (0, "Completed") and state.started_at and state.finished_at
    assert pod.spec.node_name == node and status.pod_ip == "127.0.0.1" and status.host_ip == "127.0.0.1"
    assert status.start_time is not None
    assert {c.type: c.status for c in status.conditions} == {
        "PodScheduled": "True", "Initialized": "True", "ContainersReady": "False", "Ready": "False"}
    log = tmp_path / node / "node-agent" / node / "logs" / "hi.log"
    assert log.read_text() == f"hi hello {node}\n"
    ready = {c.type: c.status for c in kube_core.read_node(node).status.conditions}
    assert ready["Ready"] == "True" and kube_core.read_node(node).metadata.labels["kubernetes.io/hostname"] == node


def test_the_node_lease_is_renewed(kube_settings, agents):
    from kubernetes import client

    node = node_name()
    agents(node)
    with kube_api(kube_settings) as api:
        leases = client.CoordinationV1Api(api)
        first = wait_for(lambda: _lease(leases, node), 30, "the node's lease").spec.renew_time
        wait_for(lambda: _lease(leases, node).spec.renew_time > first, 10, "a renewal of the lease")


def _lease(leases, node):
    try:
        return leases.read_namespaced_lease(node, "kube-node-lease")
    except ApiException:
        return None


def test_a_pod_that_exits_3_fails_with_error_3(kube_core, namespace, agents):
    agents(node_name())
    make_pod(kube_core, namespace, "three", ["sh", "-c", "exit 3"])
    state = terminated(pod_in_phase(kube_core, namespace, "three", "Failed"))
    assert (state.exit_code, state.reason) == (3, "Error")


def test_a_pod_over_its_memory_limit_is_oom_killed(kube_core, namespace, agents):
    agents(node_name())
    hog = "import time; x = b'a' * (200 * 1024 * 1024); time.sleep(60)"
    make_pod(kube_core, namespace, "hog", ["python3", "-c", hog], memory="64Mi")
    state = terminated(pod_in_phase(kube_core, namespace, "hog", "Failed"))
    assert (state.exit_code, state.reason) == (137, "OOMKilled")


def test_deleting_a_running_pod_kills_its_processes_and_the_pod_disappears(kube_core, namespace, agents):
    agents(node_name())
    make_pod(kube_core, namespace, "sleeper", ["sleep", "300"], grace=5)
    shim = psutil.Process(shim_pid(pod_in_phase(kube_core, namespace, "sleeper", "Running")))
    sleeper = wait_for(shim.children, 5, "the pod's command")[0]
    kube_core.delete_namespaced_pod("sleeper", namespace)
    wait_for(lambda: gone(kube_core, namespace, "sleeper"), 15, "the pod to disappear")
    wait_for(lambda: not sleeper.is_running(), 5, "the pod's process to end")


def test_two_agents_share_ten_pods_each_bound_once_and_pinned_pods_go_where_pinned(
        kube_core, namespace, agents, tmp_path):
    nodes = [node_name(), node_name()]
    for node in nodes:
        agents(node)
    for index in range(10):
        make_pod(kube_core, namespace, f"p{index}", ["sh", "-c", "echo $TOCK_HOSTNAME"])
    make_pod(kube_core, namespace, "pinned", ["true"], node=nodes[1])
    names = [f"p{index}" for index in range(10)] + ["pinned"]
    pods = [pod_in_phase(kube_core, namespace, name, "Succeeded") for name in names]
    assert pods[-1].spec.node_name == nodes[1]
    for pod in pods[:-1]:
        logs = [tmp_path / node / "node-agent" / node / "logs" / f"{pod.metadata.name}.log" for node in nodes]
        ran_on = [node for node, log in zip(nodes, logs, strict=False) if log.exists()]
        assert ran_on == [pod.spec.node_name]
        assert logs[nodes.index(pod.spec.node_name)].read_text() == f"{pod.spec.node_name}\n"


def test_a_killed_agent_takes_its_pods_processes_with_it(kube_core, namespace, agents):
    agent = agents(node_name())
    make_pod(kube_core, namespace, "doomed", ["sleep", "300"])
    shim = psutil.Process(shim_pid(pod_in_phase(kube_core, namespace, "doomed", "Running")))
    sleeper = wait_for(shim.children, 5, "the pod's command")[0]
    agent.kill()
    wait_for(lambda: not shim.is_running() and not sleeper.is_running(), 5, "the pod's processes to be killed")


def test_a_restarted_agent_finds_its_running_pod_again_and_reports_its_end(kube_core, namespace, agents, tmp_path):
    node = node_name()
    first = agents(node, tmp_path / "home")
    make_pod(kube_core, namespace, "long", ["sh", "-c", "until [ -f go ]; do sleep 0.1; done; exit 7"])
    shim = psutil.Process(shim_pid(pod_in_phase(kube_core, namespace, "long", "Running")))
    assert first.stop() == 0
    time.sleep(0.5)
    assert shim.is_running()  # a clean stop leaves the pods running
    agents(node, tmp_path / "home")
    wait_for(lambda: "found its process again" in _text(tmp_path / "home"), 30, "the restarted agent to find it")
    (tmp_path / "home" / "node-agent" / node / "pods" / "long" / "go").touch()
    state = terminated(pod_in_phase(kube_core, namespace, "long", "Failed"))
    assert (state.exit_code, state.reason) == (7, "Error")


def test_a_pod_that_vanished_while_its_agent_was_away_is_reported_unknown(kube_core, namespace, agents, tmp_path):
    node = node_name()
    first = agents(node, tmp_path / "home")
    make_pod(kube_core, namespace, "lost", ["sleep", "300"])
    shim = psutil.Process(shim_pid(pod_in_phase(kube_core, namespace, "lost", "Running")))
    first.stop()
    for process in [shim, *shim.children(recursive=True)]:  # the shim first: it would record its child's end
        process.kill()  # as a reboot would
    agents(node, tmp_path / "home")
    state = terminated(pod_in_phase(kube_core, namespace, "lost", "Failed"))
    assert state.reason == "ContainerStatusUnknown"


def _text(home) -> str:
    return "".join(path.read_text() for path in home.glob("agent-*.log"))


class TestWhileTheApiServerIsAway:
    """Faults of the API server itself: on a private control plane, never the session's shared one."""

    @pytest.fixture
    def kube_target(self, private_namespace):
        return private_namespace

    def test_the_agent_survives_an_api_server_restart_and_reports_what_ended_meanwhile(
            self, private_kube, kube_core, namespace, agents, tmp_path):
        node = node_name()
        agent = agents(node)
        make_pod(kube_core, namespace, "through",
                 ["sh", "-c", "until [ -f go ]; do sleep 0.1; done; exit 0"])
        pod_in_phase(kube_core, namespace, "through", "Running")
        private_kube.apiserver.stop(timeout=15)
        try:
            (tmp_path / node / "node-agent" / node / "pods" / "through" / "go").touch()
            time.sleep(3)  # the pod ends while the API server is away; the agent keeps going
            assert agent.process.poll() is None
        finally:
            private_kube.start(with_agent=False)
        state = terminated(pod_in_phase(kube_core, namespace, "through", "Succeeded", seconds=60))
        assert state.exit_code == 0
        make_pod(kube_core, namespace, "after", ["true"])  # its watches are back too
        pod_in_phase(kube_core, namespace, "after", "Succeeded", seconds=60)

    def test_memory_limits_hold_while_the_api_server_hangs(
            self, private_kube, kube_core, namespace, agents, tmp_path):
        node = node_name()
        agents(node)
        hog = ("import os, time\nwhile not os.path.exists('go'): time.sleep(0.05)\n"
               "x = b'a' * (200 * 2**20)\ntime.sleep(60)")
        make_pod(kube_core, namespace, "hog", ["python3", "-c", hog], memory="64Mi")
        make_pod(kube_core, namespace, "first", ["sh", "-c", "until [ -f go ]; do sleep 0.05; done"])
        shim = psutil.Process(shim_pid(pod_in_phase(kube_core, namespace, "hog", "Running")))
        pod_in_phase(kube_core, namespace, "first", "Running")
        pods = tmp_path / node / "node-agent" / node / "pods"
        apiserver = private_kube.apiserver.live_pid()
        os.kill(apiserver, signal.SIGSTOP)  # connections accepted, never answered
        try:
            (pods / "first" / "go").touch()  # its end is to be reported: that call hangs
            time.sleep(1.0)
            (pods / "hog" / "go").touch()
            wait_for(lambda: not shim.is_running(), 3, "the hog to be killed while the API server hangs")
        finally:
            os.kill(apiserver, signal.SIGCONT)
        state = terminated(pod_in_phase(kube_core, namespace, "hog", "Failed", seconds=60))
        assert (state.exit_code, state.reason) == (137, "OOMKilled")
