"""The node agent's narrow port to the Kubernetes API (official ``kubernetes`` client).

Every call has a short timeout: while the API server is away the agent keeps supervising
its processes and retries later.
"""

from __future__ import annotations

import logging
from pathlib import Path

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("tock.node_agent")

LEASE_NAMESPACE = "kube-node-lease"
TIMEOUT = (3, 10)  # connect, read seconds


class ApiUnavailable(RuntimeError):
    """The API server could not be reached or answered a server error; retry later."""


def load_api_client(kubeconfig: Path) -> client.ApiClient:
    """An API client for the kubeconfig (a tiny loader until infra/kube* offers one), without
    urllib3's own retries: the agent retries with its own backoff and keeps supervising meanwhile."""
    if not kubeconfig.is_file():
        raise FileNotFoundError(f"no kubeconfig at {kubeconfig}: run `tock kube start` or set TOCK_KUBECONFIG")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration, persist_config=False)
    configuration.retries = 0
    return client.ApiClient(configuration)


class OutageLog:
    """Says once that the API server went away, and once that it is back (not on every retry)."""

    def __init__(self, who: str) -> None:
        self._who, self._down = who, False

    def failed(self, error: Exception) -> None:
        if not self._down:
            log.warning("%s: API server unavailable (%s); retrying until it is back", self._who, error)
        self._down = True

    def succeeded(self) -> None:
        if self._down:
            log.info("%s: API server back", self._who)
        self._down = False


class KubeNodeApi:
    """What one node agent asks of the API server: its node and lease, its pods' bindings and status."""

    def __init__(self, api_client: client.ApiClient, namespace: str, node: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self._leases = client.CoordinationV1Api(api_client)
        self.namespace, self.node = namespace, node

    def ensure_namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        _call(self.core.create_namespace, body, tolerate=(409,))

    def register_node(self, body: dict, status: dict) -> None:
        """Create the Node (or keep the existing one) and post its status."""
        _call(self.core.create_node, body, tolerate=(409,))
        _call(self.core.patch_node_status, self.node, status)

    def post_node_status(self, status: dict) -> bool:
        """False when the Node is gone (someone deleted it): register it again."""
        return _call(self.core.patch_node_status, self.node, status, tolerate=(404,)) is not None

    def renew_lease(self, body: dict) -> None:
        if _call(self._leases.patch_namespaced_lease, self.node, LEASE_NAMESPACE, body, tolerate=(404,)) is None:
            _call(self._leases.create_namespaced_lease, LEASE_NAMESPACE, body, tolerate=(409,))

    def bind(self, pod: str, uid: str) -> bool:
        """Bind the pod to this node as kube-scheduler would; False if another agent bound it first."""
        body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod, uid=uid),
                                target=client.V1ObjectReference(api_version="v1", kind="Node", name=self.node))
        # The reply is a Status the generated client cannot read as a Binding: take it raw.
        reply = _call(self.core.create_namespaced_pod_binding, pod, self.namespace, body,
                      tolerate=(404, 409), _preload_content=False)
        return reply is not None

    def patch_status(self, pod: str, body: dict):
        """The pod as the API server has it after the patch, or None if it is gone."""
        return _call(self.core.patch_namespaced_pod_status, pod, self.namespace, body, tolerate=(404,))

    def delete_now(self, pod: str, uid: str) -> None:
        """Delete for good (grace 0), only this incarnation of the name."""
        options = client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid))
        _call(self.core.delete_namespaced_pod, pod, self.namespace, grace_period_seconds=0, body=options,
              tolerate=(404, 409))

    def list_pods(self, field_selector: str):
        return _call(self.core.list_namespaced_pod, self.namespace, field_selector=field_selector)


def _call(method, *args, tolerate: tuple[int, ...] = (), **kwargs):
    """Call with the agent's timeout; a tolerated HTTP status returns None, others raise."""
    try:
        return method(*args, _request_timeout=TIMEOUT, **kwargs)
    except ApiException as error:
        if error.status in tolerate:
            return None
        if error.status and error.status < 500 and error.status != 429:
            raise
        raise ApiUnavailable(f"{method.__name__}: HTTP {error.status} {error.reason}") from error
    except (urllib3.exceptions.HTTPError, OSError) as error:  # connection, protocol, timeout
        raise ApiUnavailable(f"{method.__name__}: {type(error).__name__}: {error}") from error
