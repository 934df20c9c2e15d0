"""Pod status bodies (strategic-merge patches of the status subresource), node and lease bodies."""

from __future__ import annotations

from typing import TypeAlias

from services.node_agent.core.decide import Outcome
from services.node_agent.core.model import Container, PodView

AGENT_IP = "127.0.0.1"  # pods run on loopback: pod and host IP alike
RUNTIME = "tock-node-agent"  # containerID scheme: no container runtime, a process tree

Body: TypeAlias = dict[str, object]  # a JSON object of the Kubernetes API


def _condition(kind: str, ok: bool, now: str, reason: str | None = None) -> Body:
    body: Body = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": now}
    return body | ({"reason": reason} if reason else {})


def _addresses(pod: PodView, now: str) -> Body:
    return {"hostIP": AGENT_IP, "hostIPs": [{"ip": AGENT_IP}], "podIP": AGENT_IP, "podIPs": [{"ip": AGENT_IP}],
            "startTime": pod.start_time or now}


def running_status(pod: PodView, container: Container, now: str) -> Body:
    """Phase Running: the container started at ``container.started_at`` and is ready."""
    conditions = [_condition(kind, True, now) for kind in ("Initialized", "ContainersReady", "Ready")]
    state: Body = {"running": {"startedAt": container.started_at}}
    return {"status": {"phase": "Running", **_addresses(pod, now), "conditions": conditions,
                       "containerStatuses": [_container_status(pod, container, state, ready=True)]}}


def final_status(pod: PodView, container: Container | None, outcome: Outcome, now: str) -> Body:
    """Phase Succeeded or Failed with the container's terminated state."""
    terminated = {"exitCode": outcome.exit_code, "reason": outcome.reason,
                  "startedAt": container.started_at if container else None, "finishedAt": now}
    if container is None:
        terminated["message"] = "the node agent found no trace of this container (lost while it was away)"
    state: Body = {"running": None, "waiting": None,
                   "terminated": {k: v for k, v in terminated.items() if v is not None}}
    conditions = [_condition("Initialized", True, now)] + [
        _condition(kind, False, now, "PodCompleted") for kind in ("ContainersReady", "Ready")]
    return {"status": {"phase": outcome.phase, **_addresses(pod, now), "conditions": conditions,
                       "containerStatuses": [_container_status(pod, container, state, ready=False)]}}


def _container_status(pod: PodView, container: Container | None, state: Body, ready: bool) -> Body:
    body = {"name": pod.container.name, "image": pod.container.image or "none", "imageID": "",
            "ready": ready, "started": ready, "restartCount": 0, "state": state}
    return body | ({"containerID": f"{RUNTIME}://{container.pid}"} if container else {})


def node_body(node: str, capacity: dict[str, str], now: str) -> Body:
    """A Node this agent stands for, labelled as the stand-in it is, Ready."""
    labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "tock.dev/node-agent": "true"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels},
            "status": node_status(capacity, now)["status"]}


def node_status(capacity: dict[str, str], now: str) -> Body:
    ready = {"type": "Ready", "status": "True", "reason": "NodeAgentReady", "lastHeartbeatTime": now,
             "lastTransitionTime": now, "message": "tock node-agent (kubelet stand-in) is posting ready status"}
    return {"status": {"capacity": capacity, "allocatable": capacity, "conditions": [ready],
                       "addresses": [{"type": "InternalIP", "address": AGENT_IP},
                                     {"type": "Hostname", "address": "localhost"}],
                       "nodeInfo": _node_info()}}


def _node_info() -> Body:
    fields = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
              "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture")
    info: Body = {field: "" for field in fields}
    return info | {"containerRuntimeVersion": f"{RUNTIME}://0", "operatingSystem": "linux"}


def lease_body(node: str, duration_seconds: int, now_micro: str) -> Body:
    """The node's heartbeat Lease (kube-node-lease), renewed now."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": duration_seconds, "renewTime": now_micro}}
