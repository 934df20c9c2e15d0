"""The node's presence: register the Node, renew its Lease every few seconds, post its Ready
status now and then; re-register if the Node was deleted. Runs in a thread; an absent API
server is retried at the next beat."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import psutil

from services.node_agent.core.status import lease_body, node_body, node_status
from services.node_agent.kube_api import LEASE_NAMESPACE, ApiUnavailable, KubeNodeApi, OutageLog

log = logging.getLogger("tock.node_agent")

LEASE_SECONDS = 40
STATUS_EVERY = 6  # beats between Node status posts


def utc_now(micro: bool = False) -> str:
    """Kubernetes time text: RFC 3339 in UTC, with exactly 6 fraction digits for a MicroTime."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def capacity() -> dict[str, str]:
    """This machine's cpu and memory; 110 pods, kubelet's default."""
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{psutil.virtual_memory().total // 1024}Ki", "pods": "110"}


class NodeHeartbeat(threading.Thread):
    """Keeps the Node registered and its Lease fresh until ``stopping`` is set."""

    def __init__(self, api: KubeNodeApi, interval: float, stopping: threading.Event,
                 now: Callable[..., str] = utc_now) -> None:
        super().__init__(name="node-heartbeat", daemon=True)
        self._api, self._interval, self._stopping, self._now = api, interval, stopping, now
        self._registered = False
        self._outage = OutageLog("node heartbeat")

    def register(self) -> None:
        """Namespace of leases, Node, first Lease: once at start (raises if the API is away)."""
        self._api.ensure_namespace(LEASE_NAMESPACE)
        now = self._now()
        self._api.register_node(node_body(self._api.node, capacity(), now), node_status(capacity(), now))
        self._api.renew_lease(lease_body(self._api.node, LEASE_SECONDS, self._now(micro=True)))
        self._registered = True

    def run(self) -> None:
        beat = 0
        while not self._stopping.wait(self._interval):
            beat += 1
            try:
                self._beat(beat)
            except ApiUnavailable as error:
                self._outage.failed(error)
            else:
                self._outage.succeeded()

    def _beat(self, beat: int) -> None:
        if not self._registered:
            self.register()
            return
        self._api.renew_lease(lease_body(self._api.node, LEASE_SECONDS, self._now(micro=True)))
        if beat % STATUS_EVERY == 0 and not self._api.post_node_status(node_status(capacity(), self._now())):
            self._registered = False
            self.register()
