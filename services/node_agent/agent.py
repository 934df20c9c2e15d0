"""The node agent's shell: fold what the pod streams and the processes report, decide, act.

One main loop (every ``tick``) owns the state; the pod streams and the node heartbeat are
threads that only talk to the API server. SIGTERM stops it cleanly: its pods are released
and keep running for the next agent on this node; a killed agent takes them with it.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from services.node_agent.core import decide as act
from services.node_agent.core import events as ev
from services.node_agent.core.evolve import fold
from services.node_agent.core.model import OWN, PENDING, AgentState
from services.node_agent.core.status import final_status, running_status
from services.node_agent.heartbeat import NodeHeartbeat, utc_now
from services.node_agent.kube_api import ApiUnavailable, KubeNodeApi, OutageLog
from services.node_agent.paths import AgentPaths
from services.node_agent.processes import ProcessTable
from services.node_agent.streams import PodStream
from services.node_agent.views import pod_view
from services.runner.watcher import GroupWatcher

log = logging.getLogger("tock.node_agent")


@dataclass(frozen=True)
class AgentOptions:
    node: str
    home: Path  # TOCK_HOME; the agent's own files go under <home>/node-agent/<node>
    namespace: str
    tick_seconds: float = 0.1
    lease_seconds: float = 5.0
    grace_cap_seconds: float = 30.0
    api_backoff_seconds: float = 1.0


class NodeAgent:
    def __init__(self, options: AgentOptions, api: KubeNodeApi, base_env: Mapping[str, str]) -> None:
        self._options, self._api, self._base_env = options, api, base_env
        self._policy = act.Policy(options.node, options.grace_cap_seconds)
        self._inbox: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._api_retry_at = 0.0
        self._outage = OutageLog("pod status")
        self.state = AgentState()

    def run(self) -> int:
        """Until SIGTERM/SIGINT; returns the exit code."""
        watcher = GroupWatcher.start()  # forked before any thread
        processes = ProcessTable(AgentPaths.of(self._options.home, self._options.node), self._options.node,
                                 watcher, self._base_env)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self._stopping.set())
        try:
            self.state = fold(self.state, processes.find_again())
            self._start_threads()
            while not self._stopping.wait(self._options.tick_seconds):
                self._tick(processes)
        finally:
            processes.release_all()
            watcher.close()
            log.info("node agent %s stopped; its running pods were released", self._options.node)
        return 0

    def _start_threads(self) -> None:
        heartbeat = NodeHeartbeat(self._api, self._options.lease_seconds, self._stopping)
        try:
            heartbeat.register()
            log.info("node %s registered", self._options.node)
        except ApiUnavailable as error:
            log.warning("node %s not registered yet (%s); the heartbeat retries", self._options.node, error)
        node = self._options.node
        for thread in (heartbeat, PodStream(self._api, OWN, f"spec.nodeName={node}", self._inbox, self._stopping),
                       PodStream(self._api, PENDING, "spec.nodeName=", self._inbox, self._stopping)):
            thread.start()

    def _tick(self, processes: ProcessTable) -> None:
        self.state = fold(self.state, self._drained() + processes.poll())
        for action in act.decide(self.state, self._policy, time.monotonic()):
            self.state = fold(self.state, self._perform(action, processes))

    def _drained(self) -> list[ev.Event]:
        events = []
        while True:
            try:
                events.append(self._inbox.get_nowait())
            except queue.Empty:
                return events

    def _perform(self, action: act.Action, processes: ProcessTable) -> list[ev.Event]:
        match action:
            case act.StartContainer(pod):
                return [processes.start(pod, utc_now())]
            case act.SignalContainer(name, signal_name, reason):
                return [processes.signal(name, signal_name, reason, time.monotonic())]
            case act.ForgetContainer(name):
                return [processes.forget(name)]
        if time.monotonic() < self._api_retry_at:
            return []
        try:
            events = self._call_api(action)
        except ApiUnavailable as error:
            self._outage.failed(error)
        except ApiException as error:  # refused: say so loudly, retry later rather than lose the report
            log.error("%s refused by the API server: %s %s %s", type(action).__name__, error.status, error.reason,
                      error.body)
        else:
            self._outage.succeeded()
            return events
        self._api_retry_at = time.monotonic() + self._options.api_backoff_seconds
        return []

    def _call_api(self, action: act.Action) -> list[ev.Event]:
        match action:
            case act.BindPod(pod):
                return self._bind(pod)
            case act.ReportRunning(pod, container):
                return self._patched(pod.name, running_status(pod, container, utc_now()), ev.RunningReported(pod.name))
            case act.ReportFinal(pod, container, outcome):
                events = self._patched(pod.name, final_status(pod, container, outcome, utc_now()),
                                       ev.FinalReported(pod.name))
                log.info("pod %s: %s (%s, exit code %d)", pod.name, outcome.phase, outcome.reason, outcome.exit_code)
                return events
            case act.FinalizePod(pod):
                self._api.delete_now(pod.name, pod.uid)
                log.info("pod %s: deleted", pod.name)
                return [ev.PodVanished(OWN, pod.name)]
        raise TypeError(f"the node agent cannot perform {type(action).__name__}")

    def _bind(self, pod) -> list[ev.Event]:
        try:
            if self._api.bind(pod.name, pod.uid):
                log.info("pod %s: bound to %s", pod.name, self._options.node)
        except ApiException as error:  # refused for good (e.g. invalid): do not retry every tick
            log.warning("pod %s: binding refused: %s %s", pod.name, error.status, error.reason)
        return [ev.BindAttempted(pod.uid)]

    def _patched(self, name: str, body: dict, reported: ev.Event) -> list[ev.Event]:
        pod = self._api.patch_status(name, body)
        return [reported] + ([ev.PodObserved(OWN, pod_view(pod))] if pod is not None else [])
