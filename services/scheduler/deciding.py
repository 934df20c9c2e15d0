"""One turn's decisions: adoptions after a takeover, the core's ``decide`` per owned partition,
and this instance's own heartbeat (tock.schedulers)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TypeAlias

from infra.log import partition_for, routing_key
from infra.settings import Settings
from schemas import (
    AssetConsumerDropped,
    AssetConsumerRegistered,
    AssetEventQueued,
    AssetEventRecorded,
    AssetReaderDropped,
    AssetReaderRegistered,
    ClearTask,
    Event,
    ExternalTaskReported,
    ExternalWaitCancelled,
    ExternalWaitRequested,
    InletEventDelivered,
    PoolSlotsGranted,
    PoolSlotsReleased,
    PoolSlotsRequested,
    SchedulerHeartbeat,
    TaskPoolGranted,
)
from services.scheduler.core import Policy, decide, decide_adoption, orphans
from services.scheduler.evidence import HeartbeatEvidence
from services.scheduler.holdings import Holdings, Touched
from services.scheduler.launching import Executor

log = logging.getLogger("tock.scheduler")

Decision: TypeAlias = tuple[int | None, Event]  # (partition, event); None: not of a partition (tock.schedulers)
# Steps written across partitions (pools' and assets'): each may land on another partition than its decider's.
_CROSSING = (PoolSlotsRequested, PoolSlotsGranted, PoolSlotsReleased, TaskPoolGranted, AssetEventRecorded,
             AssetEventQueued, AssetConsumerRegistered, AssetConsumerDropped, AssetReaderRegistered,
             AssetReaderDropped, InletEventDelivered, ExternalWaitRequested,
             ExternalTaskReported, ExternalWaitCancelled, ClearTask)


class Deciding:
    """Asks the core what to do about the owned partitions, and says when this instance is alive."""

    def __init__(self, policy: Policy, executors: Mapping[str, Executor], holdings: Holdings,
                 settings: Settings) -> None:
        self._policy, self._executors, self._holdings = policy, executors, holdings
        self._host, self._every = settings.host, settings.task_heartbeat_seconds
        self._partitions = settings.partitions
        self._next_heartbeat = 0.0

    def decisions(self, now: float, touched: Touched, evidence: HeartbeatEvidence) -> list[Decision]:
        """The core's decisions for every settled partition (all its decisions read back), walking the
        runs touched (or all); an unsettled partition's runs are walked once it is settled."""
        holdings = self._holdings
        decisions: list[Decision] = []
        for partition, memory in holdings.memories.items():
            walk = holdings.walk(partition, touched)
            if not memory.settled(now):
                holdings.defer(partition, walk)
                continue
            holdings.walked(partition)
            grounds = None if partition in holdings.adoption_due else evidence.of(partition)
            decisions += [(self._landing(partition, event), event)
                          for event in decide(memory.state, now, self._policy, walk, grounds)]
        return decisions

    def _landing(self, partition: int, event: Event) -> int | None:
        """The partition whose memory awaits ``event`` read back: the deciding one, but for the steps of a
        pool, an asset or a wait on another DAG, written across partitions (schemas/pools.py, schemas/assets.py,
        schemas/external.py): where its route puts
        it, if that partition is ours (else None: no memory of ours reads it)."""
        if not isinstance(event, _CROSSING):
            return partition
        landing = partition_for(routing_key(event)[1], self._partitions)
        return landing if landing in self._holdings.memories else None

    def adoptions(self, now: float) -> list[Decision]:
        """After a takeover: ask each orphan's executor (named by its TaskQueued) whether it lives.
        The partition stays in ``adoption_due`` (no try of it declared dead) until they commit."""
        decisions: list[Decision] = []
        scheduler_id = self._policy.scheduler_id
        for partition in sorted(self._holdings.adoption_due):
            state = self._holdings.memories[partition].state
            alive = {orphan.key: self._probe(orphan.executor, orphan.handle)
                     for orphan in orphans(state, scheduler_id)}
            adopted = decide_adoption(state, now, scheduler_id, alive)
            log.info("partition %d: %d orphan(s), %d alive and adopted", partition, len(alive), len(adopted))
            decisions += [(partition, event) for event in adopted]
        return decisions

    def heartbeat(self, now: float) -> list[Decision]:
        """This instance's heartbeat, once every task heartbeat interval."""
        if now < self._next_heartbeat:
            return []
        self._next_heartbeat = now + self._every
        return [(None, SchedulerHeartbeat(scheduler_id=self._policy.scheduler_id, hostname=self._host,
                                          pid=os.getpid(), partitions=sorted(self._holdings.memories), at=now))]

    def _probe(self, executor_name: str, handle: str) -> bool | None:
        executor = self._executors.get(executor_name)
        return None if executor is None or not handle else executor.is_alive(handle)
