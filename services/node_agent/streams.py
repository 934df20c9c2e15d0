"""Pod streams: list, then watch from the list's resourceVersion; relist on 410 Gone; reconnect
with backoff while the API server is away. Each stream runs in a thread and feeds events to
the agent's queue (the main loop alone folds)."""

from __future__ import annotations

import logging
import queue
import threading

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from services.node_agent.core import events as ev
from services.node_agent.kube_api import ApiUnavailable, KubeNodeApi, OutageLog
from services.node_agent.views import pod_view

log = logging.getLogger("tock.node_agent")

WATCH_SECONDS = 30  # the server ends each watch after this; the stream watches again from where it was
MAX_BACKOFF = 5.0


class Relist(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class PodStream(threading.Thread):
    """One field-selected view of the namespace's pods (``stream`` names it in the events)."""

    def __init__(self, api: KubeNodeApi, stream: str, field_selector: str, sink: queue.Queue,
                 stopping: threading.Event) -> None:
        super().__init__(name=f"pods-{stream}", daemon=True)
        self._api, self._stream, self._selector = api, stream, field_selector
        self._sink, self._stopping = sink, stopping

    def run(self) -> None:
        backoff, outage = 0.2, OutageLog(f"pods {self._stream}")
        while not self._stopping.is_set():
            try:
                version = self._relist()
                outage.succeeded()
                backoff = 0.2
                self._follow(version)
            except Relist:
                log.info("pods %s: watch expired (410 Gone), listing again", self._stream)
            except (ApiUnavailable, ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
                outage.failed(error)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _relist(self) -> str:
        listing = self._api.list_pods(self._selector)
        self._sink.put(ev.StreamListed(self._stream, tuple(pod_view(pod) for pod in listing.items)))
        return listing.metadata.resource_version

    def _follow(self, version: str) -> None:
        while not self._stopping.is_set():
            version = self._watch_once(version)

    def _watch_once(self, version: str) -> str:
        watcher = watch.Watch()
        try:
            for event in watcher.stream(self._api.core.list_namespaced_pod, self._api.namespace,
                                        field_selector=self._selector, resource_version=version,
                                        allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
                                        _request_timeout=(3, WATCH_SECONDS + 10)):
                version = event["raw_object"]["metadata"]["resourceVersion"]
                self._forward(event)
                if self._stopping.is_set():
                    break
        except ApiException as error:
            if error.status == 410:
                raise Relist() from error
            raise
        finally:
            watcher.stop()
        return version

    def _forward(self, event: dict) -> None:
        kind = event["type"]
        if kind == "DELETED":
            self._sink.put(ev.PodVanished(self._stream, event["object"].metadata.name))
        elif kind in ("ADDED", "MODIFIED"):
            self._sink.put(ev.PodObserved(self._stream, pod_view(event["object"])))
