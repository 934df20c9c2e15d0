"""Committing a turn's decisions with the consumed offsets (and snapshots) in one transaction; the
partitions they concern then wait for them to be read back (memory.py: folded in log order, never
at commit); and the proof of ownership launching waits for."""

from __future__ import annotations

import logging
import time

from infra.log import PartitionsLost, RawRecord, TransactionAborted
from schemas import Event
from services.scheduler.clients import SchedulerClients
from services.scheduler.deciding import Decision
from services.scheduler.evidence import SLOW_CALL, HeartbeatEvidence
from services.scheduler.holdings import Holdings
from services.scheduler.launching import Launcher
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.snapshots import Snapshots

log = logging.getLogger("tock.scheduler")


class Committing:
    """The decisions to commit next (``pending``), and whether launching may go on (``may_launch``)."""

    def __init__(self, clients: SchedulerClients, holdings: Holdings, snapshots: Snapshots,
                 evidence: HeartbeatEvidence, launcher: Launcher, metrics: SchedulerMetrics) -> None:
        self._clients, self._holdings, self._snapshots = clients, holdings, snapshots
        self._evidence, self._launcher, self._metrics = evidence, launcher, metrics
        self.pending: list[Decision] = []  # (partition, event) to commit next
        # Launching waits for proof that this instance still owns its partitions: a commit
        # in the current group generation. A PartitionsLost abort withdraws it.
        self.may_launch = True

    def commit(self, decisions: list[Decision], snapshots: list[int]) -> None:
        """Commit the pending decisions, these, and these partitions' snapshots; or decide again."""
        batch = self.pending + decisions
        started = time.time()
        try:
            self._commit_now(batch, self._snapshots.records(snapshots))
        except TransactionAborted as error:
            self._metrics.aborted.inc()
            self._aborted(error)
            self._snapshots.put_off(snapshots)
            return
        finally:
            elapsed = time.time() - started
            if elapsed > SLOW_CALL:
                self._evidence.unreachable(time.time())
        self._metrics.commit_seconds.observe(elapsed)
        # A commit that outlasted the ownership window (this process was frozen, or the broker
        # away) proves nothing about today's ownership: the next commit must, before any launch.
        self.pending, self.may_launch = [], elapsed < self._clients.ownership_window
        self._holdings.adoption_due.clear()
        self._committed(batch)

    def goodbye(self, farewell: Decision) -> None:
        """The last commit: launches already made go out with it, so the next owner sees their handles."""
        try:
            snapshots = self._snapshots.records(self._snapshots.all())  # a fast restart
            self._commit_now(self.pending + [farewell], snapshots)
        except TransactionAborted as error:  # e.g. the group rebalanced as we stopped: the next owner relaunches
            log.warning("stopping: the last decisions were not committed (%s); the runners' claims in the "
                        "log keep any try from running twice", error)

    def revoked(self, partitions: set[int]) -> None:
        """Before revoked partitions are forgotten: commit the launches already made for them."""
        # A revocation is the member's last moment in the generation: its TaskLaunched records
        # (the handles of processes already started) go out now, or the new owner launches again.
        if not any(partition in partitions for partition, _event in self.pending):
            return
        try:
            self._commit_now(self.pending)
        except TransactionAborted as error:
            log.warning("launches of revoked partitions not committed (%s); their new owner finds the "
                        "tries queued and the runners' claims in the log", error)
            return
        self._committed(self.pending)
        self.pending = []

    def forget(self, partitions: set[int]) -> None:
        """Revoked partitions: their memories, their launches in hand and their pending decisions go."""
        for partition in partitions:
            memory = self._holdings.forget(partition)
            if memory is not None:
                self._launcher.forget(memory)
        self.pending = [(partition, event) for partition, event in self.pending
                        if partition in self._holdings.memories or partition is None]

    def _aborted(self, error: TransactionAborted) -> None:
        log.warning("decisions not committed (%s); deciding again", error)
        self._evidence.unreachable(time.time())
        # The lost decisions came from runs that no new event may touch again: walk all. Lost
        # adoptions are probed again (adoption_due is kept until a commit carries them).
        self._holdings.walk_everything()
        if isinstance(error, PartitionsLost):
            self.may_launch = False  # until a commit proves which partitions are still ours

    def _committed(self, batch: list[Decision]) -> None:
        self._metrics.committed(event for _partition, event in batch)
        now, by_partition = time.time(), dict[int, list[Event]]()
        for partition, event in batch:
            if partition is not None:
                by_partition.setdefault(partition, []).append(event)
        for partition, events in by_partition.items():
            memory = self._holdings.memories.get(partition)
            if memory is not None:
                memory.committed(events, now)

    def _commit_now(self, batch: list[Decision], snapshots: list[RawRecord] | None = None) -> None:
        snapshots = snapshots or []
        offsets = self._holdings.offsets(self._clients.events_topic)
        self._clients.session.commit([event for _partition, event in batch], self._clients.events, offsets,
                                     snapshots)
        self._snapshots.written(snapshots)
