"""The grounds on which a scheduler may declare a try dead: how far it has read the heartbeat log.

A try is dead only when its partition of tock.heartbeats has been read up to an end offset
fetched *after* its deadline passed, and the log had been reachable for a whole timeout
before (runners that lost the broker deliver their backlog first). A broker outage yields
no fetch and so no evidence: nothing is declared dead while the log cannot be read.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from infra.log import EventReader
from schemas import HEARTBEATS
from services.scheduler.core import Evidence, Policy, overdue_tries
from services.scheduler.holdings import Holdings

log = logging.getLogger("tock.scheduler")

FETCH_TIMEOUT = 2.0  # a watermark fetch slower than this says the log is not (fully) reachable
SLOW_CALL = 2.0      # a commit slower than this counts as a break in reachability


@dataclass(frozen=True, slots=True)
class Mark:
    """The end offset of a heartbeat partition as fetched at ``fetched_at``."""

    fetched_at: float
    end: int


class HeartbeatEvidence:
    """Per owned partition: the time up to which its heartbeats were read, and reachability."""

    def __init__(self, reader: EventReader, heartbeats_topic: str) -> None:
        self._reader = reader
        self._topic = heartbeats_topic
        self._marks: dict[int, Mark] = {}
        self._heard: dict[int, float] = {}
        self._owned_since: dict[int, float] = {}
        self.reachable_since = 0.0

    def assigned(self, partitions: list[int], now: float) -> None:
        """A new owner knows nothing of the log's past reachability: it counts from now."""
        for partition in partitions:
            self._owned_since[partition] = now
            self._heard.pop(partition, None)
            self._marks.pop(partition, None)

    def revoked(self, partitions: list[int]) -> None:
        for partition in partitions:
            for table in (self._owned_since, self._heard, self._marks):
                table.pop(partition, None)

    def unreachable(self, until: float) -> None:
        """The log could not be reached (or only slowly) until ``until``."""
        if until > self.reachable_since:
            self.reachable_since = until

    def request(self, partition: int) -> None:
        """Fetch the partition's end offset now, unless a fetch is already waiting to be reached."""
        if partition in self._marks:
            return
        started = time.time()
        try:
            _low, end = self._reader.consumer.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=FETCH_TIMEOUT, cached=False)
        except KafkaException as error:
            log.info("partition %d: heartbeat log not readable (%s): no try is declared dead meanwhile",
                     partition, error.args[0])
            self.unreachable(time.time())
            return
        if time.time() - started > SLOW_CALL:
            self.unreachable(time.time())
        self._marks[partition] = Mark(started, end)

    def read_up_to(self, partition: int, position: int) -> None:
        """The heartbeat reader's next offset for ``partition``: a mark it reached becomes evidence."""
        mark = self._marks.get(partition)
        if mark is not None and position >= mark.end:
            del self._marks[partition]
            self._heard[partition] = max(self._heard.get(partition, 0.0), mark.fetched_at)

    def of(self, partition: int) -> Evidence | None:
        """The evidence for ``partition``, None while it has none."""
        heard = self._heard.get(partition)
        if heard is None:
            return None
        return Evidence(heard, max(self.reachable_since, self._owned_since.get(partition, 0.0)))



def gather_evidence(evidence: HeartbeatEvidence, holdings: Holdings, now: float, policy: Policy) -> None:
    """For partitions with a try overdue by the clock, fetch the heartbeat log's end: once the
    reader has read up to it, the overdue tries may be declared dead."""
    for partition, memory in holdings.memories.items():
        evidence.read_up_to(partition, memory.positions[HEARTBEATS])
        if partition not in holdings.adoption_due and overdue_tries(memory.state, now, policy.heartbeat_timeout,
                                                                    evidence.reachable_since,
                                                                    policy.start_timeout):
            evidence.request(partition)
