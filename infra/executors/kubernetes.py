"""The Kubernetes executor: one pod per try, through the official client, against any API server.

A try's pod name is derived from the try key (DNS-1123, at most 63 characters, unique per try
and installation), so a second create of the same try is refused by the API server (409: the
name is taken) and counts as the launch it repeats. Pods carry labels for the installation,
the partition (``murmur2(dag_id) % N``, as every topic), the DAG, task and try, and
annotations with the exact ids. A scheduler watches and lists pods by the labels of the
partitions it owns, never by a scheduler's identity (kube_watch.py).

It implements the executor port (infra/executors/base.py): Executor, Killing (a pod's delete)
and Watching (the owned partitions' pods). A pod's command is ``tock run-task`` with the try
message's fields as arguments (tock_cli/runner_commands.py): the same runner as every executor's.

The core rules it relies on, rather than enforcing them itself:
- launch after commit: a pod is created only once its try's TaskQueued is committed, and its
  name is committed in TaskLaunched afterwards (services/scheduler/launching.py);
- the claim: a pod created twice is refused by the API server, and two runners of one try run
  it once (services/runner/core/claim.py);
- a pod the API server refuses for good (422 invalid, 403 a quota) is a refusal of its try alone
  (``LaunchRefused`` with the server's message): the scheduler fails that try, and the rest of the
  batch is launched and recorded as usual;
- liveness: heartbeats decide a try's death (services/scheduler/core/liveness.py); a pod seen
  Pending or Running makes ``is_alive`` True, otherwise it cannot tell (None).
- bounded calls: every API request has a timeout (TOCK_KUBE_REQUEST_TIMEOUT); a launch waits for
  its creates at most LAUNCH_WAIT (the tries not answered stay queued: created again later, the
  409 counting as the launch), deletes of finished pods run on threads of their own, and a kill
  is called off the scheduler's main loop (services/scheduler/launching.py). What the watch
  sees is written once per pod and folded by services/scheduler/core/pods.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait

from kubernetes import client as kube
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from infra.executors.base import LaunchRefused, LaunchResult
from infra.executors.handles import pod_name
from infra.executors.kube_watch import PodView, PodWatcher
from infra.executors.requests import TryRequest
from infra.kube_client import kube_api
from infra.log import partition_for
from infra.registry import exported_ids
from infra.settings import Settings
from schemas import PodFinished, PodStarted

log = logging.getLogger("tock.executor.kubernetes")

NAME = "kubernetes"
MANAGED_BY = "app.kubernetes.io/managed-by"
INSTALLATION, PARTITION = "tock.dev/installation", "tock.dev/partition"
DAG, TASK, TRY = "tock.dev/dag", "tock.dev/task", "tock.dev/try"
IDS = ("tock.dev/dag-id", "tock.dev/run-id", "tock.dev/task-id", "tock.dev/try-number")  # annotations
CREATE_THREADS = 8
DELETE_THREADS = 2
LAUNCH_WAIT = 2.0  # seconds launch_many waits for its creates at most (also bounded by the request timeout)
SEND_BACKOFF_FIRST, SEND_BACKOFF_MOST = 0.5, 5.0
# What a try's runner needs of the scheduler's settings, passed to its pod's environment.
RUNNER_SETTINGS = ("topic_prefix", "partitions", "task_heartbeat_seconds", "task_log_ship_limit_bytes", "log_level")


def installation_label(prefix: str) -> str:
    """The installation's label value: its topic prefix, hashed into a valid label value."""
    return "i" + hashlib.sha1(prefix.encode()).hexdigest()[:12]


def _label(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value) or "x"


def pod_manifest(settings: Settings, request: TryRequest, queue: str, override: dict) -> dict:
    """The pod of one try: ``tock run-task`` with the runner's settings, and the task's pod_override."""
    ids = dict(zip(IDS, (request.dag_id, request.run_id, request.task_id, str(request.try_number)), strict=False))
    labels = {MANAGED_BY: "tock", INSTALLATION: installation_label(settings.topic_prefix),
              PARTITION: str(partition_for(request.dag_id, settings.partitions)), DAG: _label(request.dag_id),
              TASK: _label(request.task_id), TRY: str(request.try_number)}
    container = {"name": "try", "image": override.get("image", settings.kube_image),
                 "command": _command(request, queue), "env": _environment(settings, override)}
    if override.get("resources"):
        container["resources"] = override["resources"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(settings.topic_prefix, request), "labels": labels, "annotations": ids},
            "spec": {"restartPolicy": "Never", "containers": [container], "terminationGracePeriodSeconds": 30}}


def _command(request: TryRequest, queue: str) -> list[str]:
    command = ["tock", "run-task", request.dag_id, request.run_id, request.task_id, str(request.try_number),
               "--dag-file", request.dag_file, "--executor", NAME, "--queue", queue,
               "--queued-at", repr(request.queued_at)]
    if request.execution_timeout is not None:
        command += ["--execution-timeout", repr(request.execution_timeout)]
    if request.map_index >= 0:
        command += ["--map-index", str(request.map_index)]
    if request.queued_offset >= 0:
        command += ["--queued-offset", str(request.queued_offset)]
    return command


def _environment(settings: Settings, override: dict) -> list[dict]:
    values = {"TOCK_KAFKA_BOOTSTRAP": settings.bootstrap}
    values.update({f"TOCK_{name.upper()}": str(getattr(settings, name)) for name in RUNNER_SETTINGS
                   if hasattr(settings, name)})
    if settings.schema_registry_url is not None:  # the pod writes the records' wire format too
        values["TOCK_SCHEMA_REGISTRY_URL"] = settings.schema_registry_url
        values.update(exported_ids(settings))
    task_env = {str(name): str(value) for name, value in (override.get("env") or {}).items()}
    values.update(task_env)
    # The pod's runner passes its user code what the installation allows and what pod_override sets
    # for the task (never a TOCK_* name: infra/task_environment.py).
    values["TOCK_TASK_ENV_ALLOW"] = ",".join([settings.task_env_allow, *sorted(task_env)])
    return [{"name": name, "value": value} for name, value in values.items()]


class KubernetesExecutor:
    """Creates a pod per try; watches the owned partitions' pods; deletes those whose try ended."""

    name = NAME

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._api = kube_api(settings)
        self._core = kube.CoreV1Api(self._api)
        self._creates = ThreadPoolExecutor(CREATE_THREADS, thread_name_prefix="tock-pod-create")
        self._deletes = ThreadPoolExecutor(DELETE_THREADS, thread_name_prefix="tock-pod-delete")
        self.watcher = PodWatcher(self._core, settings.kube_namespace,
                                  f"{INSTALLATION}={installation_label(settings.topic_prefix)}", PARTITION,
                                  settings.kube_request_timeout)
        self._retry_at, self._backoff = 0.0, SEND_BACKOFF_FIRST
        self._creating: list[Future] = []  # creates a launch stopped waiting for: no new batch before they end
        self._deleting: set[str] = set()  # finished pods whose delete is under way
        self._lock = threading.Lock()
        self.requests_made = 0  # API requests: creates and deletes (the watcher counts its own)

    # -- the executor port -------------------------------------------------------------------
    def launch_many(self, requests: list[tuple[TryRequest, str]]) -> list[LaunchResult]:
        """Create the tries' pods (several at once): per try its handle (the pod name), a refusal (the
        API server refused the pod for good: 422 invalid, 403 a quota...), or None (not created now:
        the API server away; created again later, a 409 then counting as the launch)."""
        self._creating = [future for future in self._creating if not future.done()]
        if time.monotonic() < self._retry_at or self._creating:
            return []
        futures = [self._creates.submit(self._create, request, queue) for request, queue in requests]
        done, late = wait(futures, timeout=min(LAUNCH_WAIT, self._settings.kube_request_timeout))
        self._creating = [future for future in late if not future.cancel()]  # those under way end by their timeout
        results = [future.result() if future in done else TimeoutError("no answer in time") for future in futures]
        transient = [result for result in results if isinstance(result, Exception)]
        if transient:
            self._failed(len(transient), transient[0])
        else:
            self._backoff = SEND_BACKOFF_FIRST
        return [None if isinstance(result, Exception) else result for result in results]

    def is_alive(self, handle: str) -> bool | None:
        """True for a pod the watcher's list shows Pending or Running; else None (heartbeats decide)."""
        pod = self.watcher.pod(handle)
        return True if pod is not None and pod.phase in ("Pending", "Running") else None

    def kill(self, handle: str, at_once: bool = False) -> bool:
        """Delete the pod: its node stops it (SIGTERM to the runner, which reports the try's end; at
        once, no grace, for a try declared dead: its runner is not heard and its report no longer counts)."""
        return self._delete(handle, grace=0 if at_once else None)

    def close(self) -> None:
        self.watcher.stop()
        for pool in (self._creates, self._deletes):
            pool.shutdown(wait=True, cancel_futures=True)
        self._api.close()

    # -- watching (the scheduler's partitions) ------------------------------------------------
    def watch(self, partitions: list[int], wait: float = 0.0) -> None:
        """Follow the pods of these partitions only: one list now (adoption reads it; waited for at most
        ``wait`` seconds), then a watch, both on the watcher's thread."""
        self.watcher.follow(frozenset(partitions), wait)

    def observations(self) -> list[PodStarted | PodFinished]:
        return self.watcher.drain()

    def finished_pods(self) -> list[PodView]:
        return self.watcher.finished()

    def delete_finished(self, names: list[str]) -> None:
        """Delete finished pods whose try's outcome is in the log, on the delete threads (never waits; a
        failed delete is tried again on a later call)."""
        with self._lock:
            fresh = [name for name in names if name not in self._deleting]
            self._deleting.update(fresh)
        for name in fresh:
            self._deletes.submit(self._delete_finished, name)

    def _delete_finished(self, name: str) -> None:
        try:
            if self._delete(name, grace=0):
                self.watcher.forget(name)
        finally:
            with self._lock:
                self._deleting.discard(name)

    # -- internals --------------------------------------------------------------------------
    def _create(self, request: TryRequest, queue: str) -> str | LaunchRefused | Exception:
        """The pod's name; a refusal for good; or the error of a create to try again later."""
        override = json.loads(request.pod_override) if request.pod_override else {}
        body = pod_manifest(self._settings, request, queue, override)
        name = body["metadata"]["name"]
        self.requests_made += 1
        try:
            self._core.create_namespaced_pod(self._settings.kube_namespace, body)
        except ApiException as error:
            if error.status == 409:  # this try's pod exists already: the launch it repeats
                return name
            if refused_for_good(error.status):
                reason = refusal_reason(name, error)
                log.error("%s", reason)
                return LaunchRefused(reason)
            return error
        except (HTTPError, OSError) as error:
            return error
        return name

    def _delete(self, name: str, grace: int | None) -> bool:
        """Delete a pod; whether it is gone or going (a pod already gone counts)."""
        self.requests_made += 1
        try:
            self._core.delete_namespaced_pod(name, self._settings.kube_namespace, grace_period_seconds=grace)
        except ApiException as error:
            if error.status == 404:
                return True
            log.warning("deleting pod %s failed: %s", name, error.reason)
            return False
        except (HTTPError, OSError) as error:
            log.warning("deleting pod %s failed: %s", name, error)
            return False
        return True

    def _failed(self, unsent: int, error: Exception) -> None:
        self._retry_at = time.monotonic() + self._backoff
        log.error("Kubernetes API did not create a pod (%s): %d tries stay queued; trying again in %.1f s",
                  getattr(error, "reason", error), unsent, self._backoff)
        self._backoff = min(self._backoff * 2, SEND_BACKOFF_MOST)


def refused_for_good(status: int | None) -> bool:
    """A client error the same pod would meet again (invalid, forbidden, over a quota...); not a
    timeout (408), a name taken (409: the launch repeated) or a throttle (429)."""
    return status is not None and 400 <= status < 500 and status not in (408, 409, 429)


def refusal_reason(name: str, error: ApiException) -> str:
    """The API server's own words: its status and the message of its Status object."""
    try:
        message = json.loads(error.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return (f"the Kubernetes API server refused pod {name}: {error.status} {error.reason or ''}".rstrip()
            + (f": {message}" if message else ""))
