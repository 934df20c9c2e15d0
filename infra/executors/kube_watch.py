"""PodWatcher: the pods of the partitions a scheduler owns, listed once and then watched.

List (one request, by the installation's and the owned partitions' labels), then watch from
the list's resourceVersion; a watch that ends is resumed from the last resourceVersion seen,
and ``410 Gone`` or any error (the API server restarting) means a new list. Both run on the
watcher's thread, never the caller's: ``follow`` waits for the first list only as long as it is
told to (an adoption reads that list), so a stalled API server never holds the scheduler's loop
or its rebalance callbacks; every request has a timeout. What it sees
becomes observations for the scheduler to write (PodStarted, PodFinished), repeated freely on
a relist: the scheduler writes each once (services/scheduler/core/pods.py).

It is the Kubernetes executor's Watching ability (infra/executors/base.py), and relies on:
- ownership by partition: it follows exactly the partitions the scheduler owns now (``follow``),
  by the pods' partition label, never by which scheduler launched them;
- liveness (services/scheduler/core/liveness.py): its reports may speed a verdict (a pod that
  ended without its runner's outcome fails its try, services/scheduler/core/pods.py) but never
  overturn a live heartbeat; a pod it missed is caught by its try's heartbeat deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from kubernetes import watch as kube_watch
from kubernetes.client.rest import ApiException

from schemas import PodFinished, PodStarted

log = logging.getLogger("tock.executor.kubernetes")

IDS = ("tock.dev/dag-id", "tock.dev/run-id", "tock.dev/task-id", "tock.dev/try-number")
WATCH_SECONDS = 60      # a watch request's server-side timeout; it is resumed at once
RETRY_FIRST, RETRY_MOST = 0.2, 5.0
FINAL = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodView:
    """What the scheduler needs of a pod."""

    name: str
    uid: str
    key: tuple[str, str, str, int]  # (dag_id, run_id, task_id, try_number) from its annotations
    phase: str
    node: str = ""
    reason: str = ""
    exit_code: int | None = None


def pod_view(pod) -> PodView | None:
    """The view of a pod object of the client; None for a pod without Tock's annotations."""
    annotations = pod.metadata.annotations or {}
    try:
        dag_id, run_id, task_id, try_text = (annotations[name] for name in IDS)
        key = (dag_id, run_id, task_id, int(try_text))
    except (KeyError, ValueError):
        return None
    status = pod.status
    terminated = _terminated(status)
    return PodView(pod.metadata.name, pod.metadata.uid, key, (status.phase if status else None) or "Pending",
                   pod.spec.node_name or "", (terminated.reason if terminated else None) or
                   (status.reason if status else None) or "", terminated.exit_code if terminated else None)


def _terminated(status):
    for container in (status.container_statuses or []) if status else []:
        if container.state and container.state.terminated:
            return container.state.terminated
    return None


def observation(pod: PodView, deleted: bool = False) -> PodStarted | PodFinished | None:
    """What a pod's state says to the scheduler: it runs, it ended, or (None) nothing yet."""
    dag_id, run_id, task_id, try_number = pod.key
    ids = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "try_number": try_number,
           "pod_name": pod.name, "pod_uid": pod.uid, "at": time.time()}
    if pod.phase in FINAL:
        return PodFinished(**ids, phase=pod.phase, reason=pod.reason, exit_code=pod.exit_code, node=pod.node)
    if deleted:  # gone before it ended (a forced delete, a lost node's pods removed)
        return PodFinished(**ids, phase="Failed", reason=pod.reason or "PodDeleted", node=pod.node)
    if pod.phase == "Running":
        return PodStarted(**ids, node=pod.node)
    return None


class PodWatcher:
    """A thread that keeps the owned partitions' pods and queues what they say."""

    def __init__(self, core, namespace: str, installation_selector: str, partition_label: str,
                 request_timeout: float) -> None:
        self._core, self._namespace, self._request_timeout = core, namespace, request_timeout
        self._installation, self._partition_label = installation_selector, partition_label
        self._lock = threading.Lock()
        self._pods: dict[str, PodView] = {}
        self._observed: list[PodStarted | PodFinished] = []
        self._partitions: frozenset[int] = frozenset()
        self._generation = 0
        self._thread: threading.Thread | None = None
        self.requests_made = 0  # lists and watches started

    # -- the scheduler's side ------------------------------------------------------------------
    def follow(self, partitions: frozenset[int], wait: float = 0.0) -> None:
        """Watch these partitions from now on: list them at once, on the watcher's thread; wait at most
        ``wait`` seconds for that list (the caller reads it)."""
        with self._lock:
            if partitions == self._partitions and self._thread is not None:
                return
            self._partitions, self._generation = partitions, self._generation + 1
            generation = self._generation
        listed = threading.Event()
        self._thread = threading.Thread(target=self._watch_loop, args=(generation, listed), daemon=True,
                                        name="tock-pod-watch")
        self._thread.start()
        if wait > 0 and not listed.wait(wait):
            log.warning("listing the pods of partitions %s took over %.1f s; adoption probes cannot tell yet "
                        "(heartbeats decide)", sorted(partitions), wait)

    def pod(self, name: str) -> PodView | None:
        with self._lock:
            return self._pods.get(name)

    def finished(self) -> list[PodView]:
        with self._lock:
            return [pod for pod in self._pods.values() if pod.phase in FINAL]

    def forget(self, name: str) -> None:
        with self._lock:
            self._pods.pop(name, None)

    def drain(self) -> list[PodStarted | PodFinished]:
        with self._lock:
            observed, self._observed = self._observed, []
        return observed

    def stop(self) -> None:
        with self._lock:
            self._generation += 1

    # -- the thread --------------------------------------------------------------------------
    def _selector(self, partitions: frozenset[int]) -> str:
        return f"{self._installation},{self._partition_label} in ({','.join(map(str, sorted(partitions)))})"

    def _current(self, generation: int) -> bool:
        return generation == self._generation

    def _relist(self, generation: int) -> str | None:
        """List the partitions' pods, replacing what was known; the list's resourceVersion (None: failed)."""
        if not self._partitions:
            with self._lock:
                self._pods = {}
            return None
        try:
            self.requests_made += 1
            listed = self._core.list_namespaced_pod(self._namespace, label_selector=self._selector(self._partitions),
                                                    _request_timeout=self._request_timeout)
        except Exception as error:  # noqa: BLE001 - the API server away: the watch loop lists again
            log.warning("listing pods failed (%s); listing again shortly", error)
            return None
        views = {view.name: view for pod in listed.items if (view := pod_view(pod)) is not None}
        with self._lock:
            if self._current(generation):
                self._pods = views
                self._observed += [seen for view in views.values() if (seen := observation(view)) is not None]
        return listed.metadata.resource_version

    def _watch_loop(self, generation: int, listed: threading.Event) -> None:
        version = self._relist(generation)
        listed.set()
        backoff = RETRY_FIRST
        while self._current(generation):
            if version is None or not self._partitions:
                time.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MOST)
                version = self._relist(generation)
                continue
            try:
                version = self._watch_once(generation, version)
                backoff = RETRY_FIRST
            except ApiException as error:
                if error.status != 410:
                    log.warning("pod watch failed (%s); listing again", error.reason)
                version = None  # 410 Gone: the version is too old; list again
            except Exception as error:  # noqa: BLE001 - e.g. the API server restarting
                log.warning("pod watch broke (%s); listing again", error)
                version = None

    def _watch_once(self, generation: int, version: str) -> str:
        stream = kube_watch.Watch()
        self.requests_made += 1
        for event in stream.stream(self._core.list_namespaced_pod, self._namespace,
                                   label_selector=self._selector(self._partitions), resource_version=version,
                                   timeout_seconds=WATCH_SECONDS, allow_watch_bookmarks=True,
                                   # read: the server ends the watch after WATCH_SECONDS; past that it hangs
                                   _request_timeout=(self._request_timeout, WATCH_SECONDS + self._request_timeout)):
            if not self._current(generation):
                stream.stop()
                break
            version = self._apply(event, generation) or version
        return version

    def _apply(self, event: dict, generation: int) -> str | None:
        kind, pod = event["type"], event["object"]
        if kind == "ERROR":
            code = pod.get("code") if isinstance(pod, dict) else getattr(pod, "code", None)
            raise ApiException(status=code or 410, reason="watch error")
        if kind == "BOOKMARK" or isinstance(pod, dict):  # a bookmark comes as a bare object: its version only
            metadata = pod.get("metadata", {}) if isinstance(pod, dict) else pod.metadata.to_dict()
            return metadata.get("resourceVersion") or metadata.get("resource_version")
        version = pod.metadata.resource_version
        view = pod_view(pod)
        if view is None:
            return version
        with self._lock:
            if not self._current(generation):
                return version
            known = self._pods.pop(view.name, None) if kind == "DELETED" else None
            if kind != "DELETED":
                self._pods[view.name] = view
            seen = observation(known or view, deleted=True) if kind == "DELETED" else observation(view)
            if seen is not None and not (kind == "DELETED" and (known or view).phase in FINAL):
                self._observed.append(seen)
        return version
