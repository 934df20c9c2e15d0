"""The scheduler's shell: poll the log, fold, decide, commit decisions with offsets, then launch.

Instances share one consumer group on tock.events; owning partition p means owning p of
tock.dags and tock.heartbeats too (read by assignment). Decisions and the consumed
offsets commit in one Kafka transaction bound to the group generation (KIP-447), so an
instance that lost p cannot commit anything for it.

The loop is here; each concern it drives has its module: clients.py (the Kafka clients),
assignments.py (takeovers of the partitions assigned, on infra/log/ownership.py),
folding.py, deciding.py, evidence.py (heartbeat evidence), committing.py, snapshots.py,
pod_tending.py (executors that watch their pods), launching.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping

from infra.log.ownership import ConsumerOwnership, OwnershipTopics
from infra.settings import Settings
from infra.topics import topic_exists, topic_name
from schemas import DAGS, EVENTS, HEARTBEATS, SNAPSHOTS, SchedulerStopped
from services.scheduler.assignments import Assignments
from services.scheduler.clients import SchedulerClients, connect
from services.scheduler.committing import Committing
from services.scheduler.core import Policy, next_wakeup
from services.scheduler.deciding import Deciding
from services.scheduler.evidence import HeartbeatEvidence, gather_evidence
from services.scheduler.folding import RecordFolding
from services.scheduler.holdings import Holdings
from services.scheduler.launching import Executor, Launcher
from services.scheduler.memory import PartitionMemory, logical_topics
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.pod_tending import PodTending
from services.scheduler.snapshots import Snapshots
from services.scheduler.takeover import BackgroundTakeovers, TakeoverConfig

log = logging.getLogger("tock.scheduler")

MAX_POLL_WAIT = 0.2  # longest sleep between decisions when nothing arrives (timers, cron)
TAKEOVER_POLL_WAIT = 0.02  # ... while a takeover runs in the background: its result is installed by this loop


def new_scheduler_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Scheduler:
    """One scheduler instance. ``run()`` until ``stop()`` (from a signal handler or another thread)."""

    def __init__(self, settings: Settings, executors: Mapping[str, Executor], *,
                 scheduler_id: str | None = None, metrics: SchedulerMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or SchedulerMetrics()
        self.scheduler_id = scheduler_id or new_scheduler_id()
        self.policy = Policy(self.scheduler_id, settings.task_heartbeat_timeout, settings.task_start_timeout)
        self.executors = executors
        self.launcher = Launcher(executors, settings.executor_parallelism, self.scheduler_id)
        self.holdings = Holdings()
        self.group_id = f"{settings.topic_prefix}tock-scheduler"
        self._folding = RecordFolding(self.holdings, logical_topics(settings), self.metrics,
                                      settings.task_heartbeat_seconds)
        self._deciding = Deciding(self.policy, executors, self.holdings, settings)
        self._pods = PodTending(self.launcher.watchers, self.holdings, settings.partitions)
        self.takeovers = BackgroundTakeovers(TakeoverConfig(settings, self.group_id,
                                                            f"tock-scheduler-{self.scheduler_id}",
                                                            self._settle_timeout()))
        self._stop = threading.Event()

    @property
    def memories(self) -> dict[int, PartitionMemory]:
        """The owned partitions' memories."""
        return self.holdings.memories

    @property
    def assigned_at(self) -> dict[int, float]:
        """When each partition was taken over (for benchmarks)."""
        return self.holdings.assigned_at

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> None:
        """Join the group and schedule until stopped. Raises Fenced if this instance must not go on."""
        self._clients = connect(self.settings, self.scheduler_id, self.group_id, self._assigned, self._revoked)
        self._build(self._clients)
        log.info("scheduler %s started", self.scheduler_id)
        try:
            while not self._stop.is_set():
                self.step()
            self._say_goodbye()
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def _build(self, clients: SchedulerClients) -> None:
        """The parts that read or write through the clients."""
        settings = self.settings
        self.evidence = HeartbeatEvidence(clients.side, topic_name(settings.topic_prefix, HEARTBEATS))
        self._snapshots = Snapshots(settings, self.holdings, self.metrics,
                                    on=topic_exists(clients.events.consumer, settings.topic_prefix, SNAPSHOTS,
                                                    "scheduler"))
        self._committing = Committing(clients, self.holdings, self._snapshots, self.evidence, self.launcher,
                                      self.metrics)
        ownership = ConsumerOwnership(clients.events, clients.side,
                                      OwnershipTopics(settings.topic_prefix, EVENTS, (DAGS, HEARTBEATS)))
        self.takeovers.config = dataclasses.replace(self.takeovers.config, snapshots=self._snapshots.on)
        self._assignments = Assignments(self.takeovers, ownership, self.holdings, self._committing, self.evidence,
                                        self._pods, self.metrics)

    def _settle_timeout(self) -> float:
        # A previous owner's transaction lives at most its transaction timeout (its session
        # timeout); the coordinator then aborts it. Beyond a generous margin, try again later.
        return 2 * self.settings.scheduler_session_timeout + 10.0

    def _say_goodbye(self) -> None:
        # Launches already made are committed with the goodbye, so the next owner sees their handles.
        self._committing.goodbye((None, SchedulerStopped(scheduler_id=self.scheduler_id, at=time.time())))

    def _close(self) -> None:
        self._snapshots.close()
        self._clients.close()
        self.launcher.close()  # its stopping thread, before the executors it calls
        for executor in self.executors.values():
            executor.close()
        log.info("scheduler %s stopped", self.scheduler_id)

    # -- one turn of the loop ------------------------------------------------------------------
    def step(self) -> None:
        """Poll, fold, decide, commit, then launch."""
        # Wait for the first record only, then take what is already there: consume() would
        # otherwise sit out the whole wait collecting a full batch.
        events, side = self._clients.events, self._clients.side
        records = events.poll(self._poll_wait(), 1)
        records += events.poll(0, 5000) + side.poll(0, 5000)
        touched = self._folding.fold(records)
        self.launcher.read_back(self._folding.read_back)
        self._assignments.install_finished()
        self._assignments.retry_due()
        now = time.time()
        gather_evidence(self.evidence, self.holdings, now, self.policy)
        decisions = (self._deciding.adoptions(now) + self._deciding.decisions(now, touched, self.evidence)
                     + self._deciding.heartbeat(now))
        self._snapshots.begin(now)
        snapshots = self._snapshots.finished()
        committing = self._committing
        # A takeover is done when a commit carries its adoptions, even none: without that commit
        # the loop spun (no wait while adoptions are due) until some other decision came along.
        if decisions or committing.pending or self.holdings.adoption_due or not committing.may_launch or snapshots:
            committing.commit(decisions, snapshots)
        if committing.may_launch:
            committing.pending.extend(self.launcher.launch_ready(self.holdings.memories.values()))
        committing.pending += self._pods.tend()
        self.metrics.follow_fold([memory.state for memory in self.holdings.memories.values()], self.executors)

    def _poll_wait(self) -> float:
        if self._committing.pending or self.holdings.adoption_due or not self._committing.may_launch:
            return 0.0
        now = time.time()
        wakeups = [wakeup for memory in self.holdings.memories.values()
                   if (wakeup := next_wakeup(memory.state, self.policy.heartbeat_timeout, now,
                                             self.policy.start_timeout)) is not None]
        wait = min(wakeups, default=now + MAX_POLL_WAIT) - now
        return min(max(wait, 0.0), TAKEOVER_POLL_WAIT if self.takeovers.under_way else MAX_POLL_WAIT)

    # -- the group's callbacks (inside poll) -----------------------------------------------------
    def _assigned(self, assigned: list[tuple[str, int]]) -> None:
        self._assignments.assigned(assigned)

    def _revoked(self, revoked: list[tuple[str, int]]) -> None:
        self._assignments.revoked(revoked)
