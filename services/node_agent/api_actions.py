"""The agent's API actions (bind, report, delete) on a thread of their own, so that a slow or
absent API server never stalls the main loop's supervision of processes (memory limits,
deletions). Each action done comes back to the main loop as :class:`ActionDone` with the
events it caused (none when it must be retried)."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from services.node_agent.core import decide as act
from services.node_agent.core import events as ev
from services.node_agent.core.model import OWN, PodView
from services.node_agent.core.status import final_status, running_status
from services.node_agent.heartbeat import utc_now
from services.node_agent.kube_api import ApiUnavailable, KubeNodeApi, OutageLog
from services.node_agent.views import pod_view

log = logging.getLogger("tock.node_agent")


@dataclass(frozen=True)
class ActionDone:
    key: tuple[str, str]
    events: tuple[ev.Event, ...]


def action_key(action: act.Action) -> tuple[str, str]:
    """One action of a kind per pod in flight at once."""
    pod = getattr(action, "pod", None)
    return type(action).__name__, pod.name if pod is not None else action.name


class ApiWorker(threading.Thread):
    """Performs queued API actions in order; after a failure it waits ``backoff`` seconds."""

    def __init__(self, api: KubeNodeApi, done: queue.Queue, stopping: threading.Event, backoff: float) -> None:
        super().__init__(name="api-actions", daemon=True)
        self.todo: queue.Queue = queue.Queue()
        self._api, self._done, self._stopping, self._backoff = api, done, stopping, backoff
        self._outage = OutageLog("pod status")

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                action = self.todo.get(timeout=0.2)
            except queue.Empty:
                continue
            events = self._attempt(action)
            self._done.put(ActionDone(action_key(action), tuple(events or ())))
            if events is None:
                self._stopping.wait(self._backoff)

    def _attempt(self, action: act.Action) -> list[ev.Event] | None:
        """The events the action caused, or None when it failed and must be retried."""
        try:
            events = self._perform(action)
        except ApiUnavailable as error:
            self._outage.failed(error)
            return None
        except ApiException as error:  # refused: say so loudly, retry later rather than lose the report
            log.error("%s refused by the API server: %s %s %s", type(action).__name__, error.status, error.reason,
                      error.body)
            return None
        self._outage.succeeded()
        return events

    def _perform(self, action: act.Action) -> list[ev.Event]:
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

    def _bind(self, pod: PodView) -> list[ev.Event]:
        try:
            if self._api.bind(pod.name, pod.uid):
                log.info("pod %s: bound to %s", pod.name, self._api.node)
        except ApiException as error:  # refused for good (e.g. invalid): do not retry every tick
            log.warning("pod %s: binding refused: %s %s", pod.name, error.status, error.reason)
        return [ev.BindAttempted(pod.uid)]

    def _patched(self, name: str, body: dict, reported: ev.Event) -> list[ev.Event]:
        pod = self._api.patch_status(name, body)
        return [reported] + ([ev.PodObserved(OWN, pod_view(pod))] if pod is not None else [])
