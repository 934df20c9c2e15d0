"""WorkerPresence: a worker says it is alive (WorkerHeartbeat) and that it stopped (WorkerStopped).

The worker calls :meth:`WorkerPresence.beat` every :attr:`WorkerPresence.interval` seconds
(``TOCK_TASK_HEARTBEAT_SECONDS``) and :meth:`WorkerPresence.stopped` once on a clean shutdown.
``tock executors status`` reads a worker as alive while its last beat is younger than three
intervals. A beat never blocks the worker and never ends it: one the broker cannot take in
time is dropped (a newer one follows) and logged at most once per :data:`TROUBLE_LOG_EVERY`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Message

from infra.log import DeliveryFailed, KafkaEventLog
from infra.log.closing import Closing
from infra.settings import Settings
from schemas import WorkerHeartbeat, WorkerStopped

log = logging.getLogger("tock.worker.presence")

TROUBLE_LOG_EVERY = 10.0  # seconds between two log lines about beats that were not delivered
BEATS_KEPT_WAITING = 3    # a beat undelivered for this many intervals is stale: dropped, not retried


class WorkerPresence(Closing):
    """Appends one worker's heartbeats and its clean stop to ``tock.schedulers`` (key ``worker/<name>``)."""

    def __init__(self, settings: Settings, worker: str, executor: str, queues: Sequence[str],
                 concurrency: int) -> None:
        if not worker or not executor:
            raise ValueError("a worker needs a name and an executor to report its presence")
        self.worker, self.executor = worker, executor
        self.queues, self.concurrency = sorted(set(queues)), concurrency
        self.hostname = settings.host
        self.interval = settings.task_heartbeat_seconds
        timeout_ms = max(int(BEATS_KEPT_WAITING * self.interval * 1000), 1000)
        self._events = KafkaEventLog(settings, client_id=f"tock-presence-{worker}",
                                     config={"message.timeout.ms": timeout_ms})
        self._last_trouble_log = -TROUBLE_LOG_EVERY

    def beat(self, at: float | None = None) -> None:
        """Queue a WorkerHeartbeat (at ``at``, default now) and return at once."""
        self._append(WorkerHeartbeat(worker=self.worker, executor=self.executor, hostname=self.hostname,
                                     pid=os.getpid(), queues=list(self.queues), concurrency=self.concurrency,
                                     at=time.time() if at is None else at))

    def stopped(self, at: float | None = None, timeout: float = 5.0) -> bool:
        """Append WorkerStopped and wait up to ``timeout`` seconds for the broker; False if it did not
        acknowledge it (the worker then reads as silent, later as not alive: no harm done)."""
        self._append(WorkerStopped(worker=self.worker, executor=self.executor,
                                   at=time.time() if at is None else at))
        try:
            self._events.flush(timeout)
        except DeliveryFailed as error:
            log.warning("worker %s: stop not acknowledged (%s)", self.worker, error)
            return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Close the client; beats still unacknowledged after ``timeout`` are dropped."""
        try:
            self._events.close(timeout)
        except DeliveryFailed as error:
            log.warning("worker %s: presence records dropped on close (%s)", self.worker, error)

    def _append(self, event: WorkerHeartbeat | WorkerStopped) -> None:
        try:
            self._events.append(event, on_delivery=self._on_delivery)
        except KafkaException as error:  # e.g. the topic unknown to the client for a while
            self._trouble(f"{type(event).__name__} not queued ({error})")

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._trouble(f"a presence record was not delivered ({error.str()})")

    def _trouble(self, what: str) -> None:
        if time.monotonic() - self._last_trouble_log >= TROUBLE_LOG_EVERY:
            self._last_trouble_log = time.monotonic()
            log.warning("worker %s: %s; the worker runs on", self.worker, what)
