"""The scheduler's answer to the group's assignments: park what it is given and take it over in
the background, install finished takeovers (or retry them after a backoff), forget what it loses.

The bookkeeping of owned / parked / unreplayed partitions is infra/log/ownership.py, shared
with the monitor; here is what a scheduler does around it.
"""

from __future__ import annotations

import logging
import time

from infra.log.ownership import ConsumerOwnership
from services.scheduler.committing import Committing
from services.scheduler.evidence import HeartbeatEvidence
from services.scheduler.holdings import Holdings
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.pod_tending import PodTending
from services.scheduler.takeover import BackgroundTakeovers, Takeover

log = logging.getLogger("tock.scheduler")

# How long a takeover waits for the watching executors' first list of its partitions (the adoption
# probes read it). A list that takes longer (a stalled API server) leaves the probes unable to tell:
# the tries are then left to their heartbeats, and the loop goes on.
ADOPTION_LIST_WAIT = 2.0


class Assignments:
    """Takeovers of the partitions assigned, and forgetting those revoked."""

    def __init__(self, takeovers: BackgroundTakeovers, ownership: ConsumerOwnership, holdings: Holdings,
                 committing: Committing, evidence: HeartbeatEvidence, pods: PodTending,
                 metrics: SchedulerMetrics) -> None:
        self._takeovers = takeovers
        self._ownership, self._holdings, self._committing = ownership, holdings, committing
        self._evidence, self._pods, self._metrics = evidence, pods, metrics  # evidence, pods follow the owned

    def assigned(self, assigned: list[tuple[str, int]]) -> None:
        """Called inside poll: park the new partitions and take them over in the background."""
        partitions = sorted(partition for _topic, partition in assigned)
        if partitions:
            self._ownership.park(partitions)
            self._takeovers.start(partitions)

    def install_finished(self) -> None:
        """Install the takeovers finished since the last turn; a failed one is retried later."""
        for takeover in self._takeovers.finished():
            if takeover.error is not None:
                self._takeover_failed(takeover.partitions, takeover.error)
            else:
                self._take_over(takeover)

    def retry_due(self) -> None:
        due = self._ownership.retry_due(time.time(), self._takeovers.under_way)
        if due:
            self._takeovers.start(due)

    def revoked(self, revoked: list[tuple[str, int]]) -> None:
        """Lost partitions: commit the launches already made for them while we still may, then
        forget them entirely (their new owner replays them)."""
        partitions = {partition for _topic, partition in revoked}
        self._takeovers.cancel(partitions)
        self._committing.revoked(partitions)
        self._committing.forget(partitions)
        self._ownership.revoked(partitions)
        self._evidence.revoked(sorted(partitions))
        self._ownership.reassign_side(self._holdings.positions())
        self._pods.watch_owned()  # inside the rebalance callback: waits for no list
        log.info("revoked partitions %s", sorted(partitions))

    def _take_over(self, takeover: Takeover) -> None:
        """Install the memories a background takeover rebuilt, then read on from where it ended."""
        partitions, memories = takeover.partitions, takeover.rebuilt
        for partition in partitions:
            memories[partition].snapshot_at = time.time()
        self._holdings.taken_over(memories, takeover.started)  # due adoption, every run walked
        self._ownership.taken_over(partitions, self._holdings.positions())
        self._pods.watch_owned(ADOPTION_LIST_WAIT)  # lists the new partitions' pods: the adoption probes read it
        self._evidence.assigned(partitions, time.time())
        self._observe(takeover)

    def _observe(self, takeover: Takeover) -> None:
        self._metrics.replay_seconds.observe(takeover.replayed - takeover.settled)
        self._metrics.takeover_seconds.observe(time.time() - takeover.started)
        self._metrics.takeover_from_snapshot.inc(len(takeover.from_snapshot))
        log.info("assigned partitions %s: replayed in %.3f s (%.3f s of it waiting out open transactions, "
                 "%.3f s restoring snapshots of %s; %d open runs)", takeover.partitions,
                 time.time() - takeover.started, takeover.settled - takeover.started,
                 takeover.restored - takeover.settled, sorted(takeover.from_snapshot) or "none",
                 sum(len(memory.state.runs) for memory in takeover.rebuilt.values()))

    def _takeover_failed(self, partitions: list[int], error: Exception) -> None:
        backoff = self._ownership.takeover_failed(partitions, time.time())
        log.error("taking over partitions %s failed (%s); retrying in %.0f s", partitions, error, backoff)
