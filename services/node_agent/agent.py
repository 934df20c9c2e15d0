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

from infra.group_watcher import GroupWatcher
from services.node_agent.api_actions import ActionDone, ApiWorker, action_key
from services.node_agent.core import decide as act
from services.node_agent.core import events as ev
from services.node_agent.core.evolve import fold
from services.node_agent.core.model import OWN, PENDING, AgentState
from services.node_agent.heartbeat import NodeHeartbeat, utc_now
from services.node_agent.kube_api import ApiUnavailable, KubeNodeApi
from services.node_agent.paths import AgentPaths
from services.node_agent.processes import ProcessTable
from services.node_agent.streams import PodStream

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
        self._in_flight: set[tuple[str, str]] = set()
        self._api_worker = ApiWorker(api, self._inbox, self._stopping, options.api_backoff_seconds)
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
        own = PodStream(self._api, OWN, f"spec.nodeName={node}", self._inbox, self._stopping)
        pending = PodStream(self._api, PENDING, "spec.nodeName=", self._inbox, self._stopping)
        for thread in (heartbeat, self._api_worker, own, pending):
            thread.start()

    def _tick(self, processes: ProcessTable) -> None:
        self.state = fold(self.state, self._drained() + processes.poll())
        for action in act.decide(self.state, self._policy, time.monotonic()):
            self.state = fold(self.state, self._perform(action, processes))

    def _drained(self) -> list[ev.Event]:
        """Events from the pod streams and from API actions done (those are no longer in flight)."""
        events = []
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return events
            if isinstance(item, ActionDone):
                self._in_flight.discard(item.key)
                events.extend(item.events)
            else:
                events.append(item)

    def _perform(self, action: act.Action, processes: ProcessTable) -> list[ev.Event]:
        """Process actions now; API actions go to the API worker (once per kind and pod in flight)."""
        match action:
            case act.StartContainer(pod):
                return [processes.start(pod, utc_now())]
            case act.SignalContainer(name, signal_name, reason):
                return [processes.signal(name, signal_name, reason, time.monotonic())]
            case act.ForgetContainer(name):
                return [processes.forget(name)]
        if action_key(action) not in self._in_flight:
            self._in_flight.add(action_key(action))
            self._api_worker.todo.put(action)
        return []
