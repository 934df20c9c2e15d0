"""The callbacks a monitor owes: started on worker threads (infra/callbacks.py), each ending with a
CallbackCalled committed like a miss; kept in flight until then, so none is started twice here."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from infra.callbacks import CallbackCaller
from schemas import CallbackCalled
from services.monitor.core import Notification
from services.monitor.core.notify import NotificationKey

log = logging.getLogger("tock.monitor")


class CallbackCalls:
    """Calls under way (key -> partition, notification, future), and how many ended ok or failed."""

    def __init__(self, caller: CallbackCaller, called: dict[str, int]) -> None:
        self._caller = caller
        self.in_flight: dict[NotificationKey, tuple[int, Notification, Future[Any]]] = {}
        self.called = called  # CallbackCalled committed by this instance: {"ok": n, "failed": n}

    def call_back(self, owed: list[tuple[int, Notification]]) -> None:
        """Start the calls owed that are not under way (the owner calls; a call ends with an event)."""
        for partition, notification in owed:
            if notification.key not in self.in_flight:
                future = self._caller.call(notification.target, notification.payload, context=notification.context)
                self.in_flight[notification.key] = (partition, notification, future)

    def ended(self, now: float) -> list[tuple[int, CallbackCalled]]:
        """A CallbackCalled for each call that ended, to be committed."""
        ended = []
        for partition, notification, future in self.in_flight.values():
            if future.done():
                outcome = future.result()
                ended.append((partition, CallbackCalled(
                    dag_id=notification.dag_id, run_id=notification.run_id, trigger=notification.trigger,
                    task_id=notification.task_id, try_number=notification.try_number, target=notification.target,
                    attempts=outcome.attempts, ok=outcome.ok, detail=outcome.detail, at=now)))
        return ended

    def committed(self, called: Iterable[CallbackCalled]) -> None:
        for event in called:
            self.in_flight.pop((event.dag_id, event.run_id, event.trigger, event.task_id, event.try_number,
                                event.target), None)
            self.called["ok" if event.ok else "failed"] += 1
            log.info("callback %s of %s / %s%s: %s %s after %d attempt(s) (%s)", event.trigger, event.dag_id,
                     event.run_id, f" / {event.task_id} try {event.try_number}" if event.task_id else "",
                     event.target, "ok" if event.ok else "FAILED", event.attempts, event.detail)

    def revoked(self, partitions: set[int]) -> None:
        """Calls under way for lost partitions: their new owner calls again (at least once)."""
        self.in_flight = {key: call for key, call in self.in_flight.items() if call[0] not in partitions}

    def close(self) -> None:
        self._caller.close()
