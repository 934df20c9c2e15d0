"""The monitor's answer to the group's assignments: take each assigned partition over at once
(wait out the previous owner's open transaction, replay), retry a failed takeover after a
backoff, forget what it loses. The bookkeeping is infra/log/ownership.py, shared with the scheduler."""

from __future__ import annotations

import logging
import time

from infra.log import settle
from infra.log.ownership import ConsumerOwnership
from infra.settings import Settings
from schemas import EVENTS
from services.monitor.callbacks import CallbackCalls
from services.monitor.folds import HeldFolds, rebuild

log = logging.getLogger("tock.monitor")


class MonitorTakeovers:
    """Takes assigned partitions over on the poll thread (inside the rebalance callback)."""

    def __init__(self, settings: Settings, ownership: ConsumerOwnership, held: HeldFolds, calls: CallbackCalls, *,
                 group_id: str, client_id: str) -> None:
        self._settings, self._ownership, self._held, self._calls = settings, ownership, held, calls
        self._group_id, self._client_id = group_id, client_id

    def assigned(self, assigned: list[tuple[str, int]]) -> None:
        """Called inside poll: take the new partitions over (a failed takeover is retried)."""
        partitions = sorted(partition for _topic, partition in assigned)
        if partitions:
            self._take_over(partitions)

    def retry_due(self) -> None:
        due = self._ownership.retry_due(time.time())
        if due:
            self._take_over(due)

    def revoked(self, revoked: list[tuple[str, int]]) -> None:
        """Lost partitions: forget them (their new owner replays them)."""
        partitions = {partition for _topic, partition in revoked}
        with self._held.lock:
            self._held.forget(partitions)
            self._ownership.revoked(partitions)
            self._calls.revoked(partitions)
            positions = self._held.positions()
        self._ownership.reassign_side(positions)
        log.info("revoked partitions %s", sorted(partitions))

    def _take_over(self, partitions: list[int]) -> None:
        """Wait out the previous owner's open transaction, replay, then read on from where replay ended."""
        started = time.time()
        try:
            settle(self._settings, EVENTS, partitions, timeout=2 * self._settings.monitor_session_timeout + 10,
                   client_id=f"{self._client_id}-settle", group_id=self._group_id)
            folds = rebuild(self._settings, partitions, self._client_id)
        except Exception as error:  # noqa: BLE001 - any failure of a takeover is retried, said loudly
            self._ownership.takeover_failed(partitions, time.time())
            log.error("taking over partitions %s failed (%s); retrying", partitions, error)
            return
        with self._held.lock:
            self._held.folds.update(folds)
            positions = self._held.positions()
        self._ownership.taken_over(partitions, positions)
        log.info("assigned partitions %s: replayed in %.3f s (%d open runs)", partitions, time.time() - started,
                 sum(len(fold.state.runs) for fold in folds.values()))
