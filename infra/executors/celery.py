"""The Celery executor: tries sent as Celery tasks over Redis to ``tock worker`` processes.

It implements the executor port (infra/executors/base.py): Executor and Killing (a revoke).
Each task's one argument is a try message (infra/executors/messages.py), read by the worker
(services/worker/tasks.py), whose runner is the same code as every executor's (services/runner).

A try's Celery task id is derived from the try key (and the topic prefix), so a second send
of the same try is the same task: the worker's claim through the log refuses it, and a
revoke names it without any lookup. The handle written in TaskLaunched is that id.

The core rules it relies on, rather than enforcing them itself:
- launch after commit: a try is sent only once its TaskQueued is committed, and its task id is
  committed in TaskLaunched afterwards (services/scheduler/launching.py);
- the claim: a redelivered or duplicate message runs the try at most once, and never a try
  already given up (services/runner/core/claim.py);
- liveness: heartbeats decide a try's death (services/scheduler/core/liveness.py); the workers'
  answer to ``is_alive`` is True or None, never False; a revoke (after a TaskKillRequested or a
  TaskDeclaredDead) stops a try whose runner cannot read the log, and the kill is confirmed in
  the log.

The Celery side is configured with intent (see the README's "Celery executor"):
- acks late and prefetch 1: a message is acknowledged after its try ended, and a worker
  reserves no more messages than it has free processes, so a worker lost with messages in
  hand loses at most the ones it was running.
- the Redis visibility timeout: an unacknowledged message comes back to the queue after it.
  Its only job is to recover messages a dead worker had received but not started; a try that
  had started is caught by its heartbeat deadline and retried under a new try number (a new
  task id). A redelivery of a try that started or was given up is refused by the claim, so
  the timeout may be short; it must not be so short that busy tries are redelivered over and
  over (each redelivery costs a claim read).
- every key in Redis carries the topic prefix (``global_keyprefix``), so installations or
  tests sharing a Redis never see each other's queues.
"""

from __future__ import annotations

import logging
import time

from celery import Celery
from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

from infra.executors.celery_redis import transport_for
from infra.executors.handles import celery_task_id
from infra.executors.messages import TryMessage
from infra.executors.requests import TryRequest
from infra.settings import Settings

# What a call to Celery's broker raises when Redis is away: kombu wraps some of redis's errors, not all (a
# control broadcast during a Redis restart raised redis's ConnectionError, which is no OSError, and ended a
# scheduler in the chaos soak).
BROKER_ERRORS = (OperationalError, KombuError, OSError, RedisError)

log = logging.getLogger("tock.executor.celery")

NAME = "celery"
RUN_TRY_TASK = "tock.run_try"  # the task the worker registers (services/worker)
SEND_BACKOFF_FIRST, SEND_BACKOFF_MOST = 0.5, 5.0
PROBE_TTL, PROBE_WAIT = 2.0, 1.0  # how long a workers' answer is reused; how long to wait for one


class CeleryUnavailable(RuntimeError):
    """Redis (the Celery broker) refused or did not answer a send."""


def celery_app(settings: Settings, name: str = "tock") -> Celery:
    """A Celery app configured for Tock's tries (the same for the executor and the workers)."""
    app = Celery(name, broker=settings.celery_broker_url, set_as_current=False)
    app.conf.update(
        # kombu's Redis transport with a channel that survives losing Redis with a message in hand
        # (infra/executors/celery_redis.py: a worker died of it on a Redis restart).
        broker_transport=transport_for(settings.celery_broker_url),
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_default_queue=settings.celery_default_queue,
        task_serializer="json", accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2.0,
        broker_transport_options={
            "visibility_timeout": settings.celery_visibility_timeout,
            # Look for overdue messages every quarter of the timeout (at most every minute), so a
            # message comes back within ~1.25 timeouts (kombu's default sweep is ~100 s apart).
            "unacked_restore_interval": max(1, min(60, int(settings.celery_visibility_timeout // 4))),
            "unacked_restore_throttle": 1,
            "global_keyprefix": settings.topic_prefix,
            "socket_connect_timeout": 2.0,
            "socket_timeout": 5.0,
        },
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return app




class CeleryExecutor:
    """Sends tries to Celery workers; never waits long on a Redis that is away."""

    name = NAME

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._app = celery_app(settings)
        self._retry_at = 0.0
        self._backoff = SEND_BACKOFF_FIRST
        self._running: frozenset[str] = frozenset()
        self._probed_at = -PROBE_TTL

    def launch_many(self, requests: list[tuple[TryRequest, str]]) -> list[str]:
        """Send the tries in order; returns the handles of those sent (a prefix of the requests).

        A send that fails stops the batch: the rest stay queued and are sent on a later turn,
        after a backoff, so a Redis outage costs the scheduler one short wait per backoff."""
        if time.monotonic() < self._retry_at:
            return []
        handles = []
        for request, queue in requests:
            try:
                handles.append(self._send(request, queue))
            except BROKER_ERRORS as error:
                self._failed(len(requests) - len(handles), error)
                break
        else:
            self._backoff = SEND_BACKOFF_FIRST
        return handles

    def is_alive(self, handle: str) -> bool | None:
        """True when a worker says it is running the task; otherwise None (cannot tell), never
        False: Celery's view is a second opinion, and only the heartbeat deadline kills a try."""
        return True if handle in self._running_tasks() else None

    def kill(self, handle: str, at_once: bool = False) -> bool:
        """Revoke the task, terminating the process that runs it (SIGTERM: its runner stops the user
        code and reports, even for a try declared dead); whether Redis took the revoke. It waits on
        Redis (bounded by the connection timeouts), so the scheduler calls it off its main thread."""
        try:
            self._app.control.revoke(handle, terminate=True, signal="SIGTERM")
        except BROKER_ERRORS as error:
            log.warning("revoking Celery task %s failed (%s); asked again later, and the runner obeys the log",
                        handle, error)
            return False
        return True

    def close(self) -> None:
        self._app.close()

    def _running_tasks(self) -> frozenset[str]:
        """The task ids the workers report running, asked once per PROBE_TTL (one broadcast for
        all the orphans of a takeover); empty when no worker answers in time."""
        if time.monotonic() - self._probed_at > PROBE_TTL:
            try:
                replies = self._app.control.inspect(timeout=PROBE_WAIT).active() or {}
            except BROKER_ERRORS as error:
                log.warning("asking the Celery workers what they run failed (%s); heartbeats decide", error)
                replies = {}
            self._running = frozenset(task["id"] for tasks in replies.values() for task in tasks or ())
            self._probed_at = time.monotonic()
        return self._running

    def _send(self, request: TryRequest, queue: str) -> str:
        task_id = celery_task_id(self._settings.topic_prefix, request)
        self._app.send_task(RUN_TRY_TASK, args=[TryMessage(request, NAME, queue).to_dict()], task_id=task_id,
                            queue=queue or self._settings.celery_default_queue, retry=False)
        return task_id

    def _failed(self, unsent: int, error: Exception) -> None:
        self._retry_at = time.monotonic() + self._backoff
        log.error("Celery broker unavailable (%s): %d tries stay queued; sending again in %.1f s",
                  error, unsent, self._backoff)
        self._backoff = min(self._backoff * 2, SEND_BACKOFF_MOST)
