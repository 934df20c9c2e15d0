"""The monitor's answer to the group's assignments: park what it is given and take it over in the
background (wait out the previous owner's open transaction, restore the latest snapshot, replay
what follows it), install finished takeovers on the loop's thread (or retry them after a backoff),
forget what it loses.

The rebalance callback never waits: a partition is only parked there (assigned, paused:
infra/log/ownership.py) and its takeover started on a thread of its own (infra/log/takeovers.py,
both shared with the scheduler). The monitor decides nothing for a partition until its fold is
installed, and its fold is installed only once it has read the partition up to the end it had
when the previous owner's transactions were settled: it has seen every DeadlineMissed any earlier
owner committed (at most one per run).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from infra.log import settle
from infra.log.ownership import ConsumerOwnership
from infra.log.takeovers import BackgroundTakeovers, RebuildJob
from infra.settings import Settings
from schemas import EVENTS
from services.monitor.callbacks import CallbackCalls
from services.monitor.folds import HeldFolds, PartitionFold, rebuild
from services.monitor.snapshots import restore

log = logging.getLogger("tock.monitor")


class MonitorTakeover(RebuildJob[PartitionFold]):
    """One background takeover of some partitions: the folds it rebuilt (``rebuilt``)."""


@dataclass
class TakeoverCounts:
    """Partitions taken over from their snapshot and from the start of the log, and the records replayed."""

    from_snapshot: int = 0
    from_start: int = 0
    records_replayed: int = 0


@dataclass(frozen=True)
class TakeoverConfig:
    settings: Settings
    group_id: str
    client_id: str
    snapshots: bool  # False: tock.snapshots is missing, always replay the full history


def prepare(config: TakeoverConfig, takeover: MonitorTakeover) -> MonitorTakeover:
    """Wait out the previous owner's open transaction, restore the latest snapshots, replay the rest."""
    settings = config.settings
    try:
        settle(settings, EVENTS, takeover.partitions, timeout=2 * settings.monitor_session_timeout + 10,
               client_id=f"{config.client_id}-settle", group_id=config.group_id)
        takeover.settled = time.time()
        restored = restore(settings, takeover.partitions, f"{config.client_id}-snapshots") if config.snapshots else {}
        takeover.restored = time.time()
        takeover.from_snapshot = set(restored)
        takeover.rebuilt = rebuild(settings, takeover.partitions, config.client_id, restored)
        takeover.replayed = time.time()
    except Exception as error:  # noqa: BLE001 - any failure of a takeover is retried, said loudly
        takeover.error = error
    return takeover


class MonitorTakeovers:
    """Takeovers of the partitions assigned (in the background), and forgetting those revoked."""

    def __init__(self, config: TakeoverConfig, ownership: ConsumerOwnership, held: HeldFolds,
                 calls: CallbackCalls, counts: TakeoverCounts) -> None:
        self.config, self.counts = config, counts
        self._ownership, self._held, self._calls = ownership, held, calls
        self._background: BackgroundTakeovers[MonitorTakeover] = BackgroundTakeovers(
            lambda takeover: prepare(self.config, takeover))

    @property
    def under_way(self) -> set[int]:
        return self._background.under_way

    def assigned(self, assigned: list[tuple[str, int]]) -> None:
        """Called inside poll: park the new partitions and take them over in the background."""
        partitions = sorted(partition for _topic, partition in assigned)
        if partitions:
            self._ownership.park(partitions)
            self._start(partitions)

    def install_finished(self) -> None:
        """Install the takeovers finished since the last turn; a failed one is retried later."""
        for takeover in self._background.finished():
            if takeover.error is not None:
                backoff = self._ownership.takeover_failed(takeover.partitions, time.time())
                log.error("taking over partitions %s failed (%s); retrying in %.0f s", takeover.partitions,
                          takeover.error, backoff)
            else:
                self._install(takeover)

    def retry_due(self) -> None:
        due = self._ownership.retry_due(time.time(), self._background.under_way)
        if due:
            self._start(due)

    def revoked(self, revoked: list[tuple[str, int]]) -> None:
        """Lost partitions: drop their takeovers under way and forget them (their new owner replays them)."""
        partitions = {partition for _topic, partition in revoked}
        self._background.cancel(partitions)
        with self._held.lock:
            self._held.forget(partitions)
            self._ownership.revoked(partitions)
            self._calls.revoked(partitions)
            positions = self._held.positions()
        self._ownership.reassign_side(positions)
        log.info("revoked partitions %s", sorted(partitions))

    def _start(self, partitions: list[int]) -> None:
        self._background.begin(MonitorTakeover(partitions, started=time.time()))

    def _install(self, takeover: MonitorTakeover) -> None:
        """Hold the folds the takeover rebuilt, then read on from where its replay ended."""
        replayed = {partition: fold.folded_since_snapshot for partition, fold in takeover.rebuilt.items()}
        now = time.time()
        with self._held.lock:
            for fold in takeover.rebuilt.values():
                fold.snapshot_at = now  # the records replayed count towards the next snapshot
            self._held.folds.update(takeover.rebuilt)
            positions = self._held.positions()
        self._ownership.taken_over(takeover.partitions, positions)
        self.counts.from_snapshot += len(takeover.from_snapshot)
        self.counts.from_start += len(takeover.partitions) - len(takeover.from_snapshot)
        self.counts.records_replayed += sum(replayed.values())
        log.info("assigned partitions %s: taken over in %.3f s (%.3f s of it waiting out open transactions; "
                 "snapshots of %s; replayed %s records; %d open runs)", takeover.partitions, now - takeover.started,
                 takeover.settled - takeover.started, sorted(takeover.from_snapshot) or "none",
                 sum(replayed.values()), sum(len(fold.state.runs) for fold in takeover.rebuilt.values()))
