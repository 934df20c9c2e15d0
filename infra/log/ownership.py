"""Partition ownership for a consumer-group member that replays a partition before reading it on.

A member assigned partition p of its group topic must not read p from the committed offsets
until it has replayed p (a takeover). Meanwhile p is *parked*: assigned (else the client, once
the rebalance callback returns, assigns it itself from the committed offsets) but paused. A
takeover that fails leaves p parked and *unreplayed*, retried after a backoff that doubles up
to a ceiling. A takeover that succeeds makes p *owned*: it is read on from where the replay
ended, and the member's side reader (the other topics of p, read by assignment) follows it.

``OwnershipBook`` is the pure bookkeeping (plain values in, decisions out, time passed in);
``ConsumerOwnership`` carries its decisions out on the member's consumer and side reader.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from infra.log.reader import EventReader
from infra.topics import topic_name

RETRY_FIRST, RETRY_MOST = 1.0, 30.0  # seconds between attempts at a failed takeover


@dataclass(frozen=True, slots=True)
class Retry:
    """When a failed takeover of a partition is tried again, and the backoff that got it there."""

    due: float
    backoff: float


@dataclass
class OwnershipBook:
    """Which assigned partitions are owned (replayed), parked (held paused), and unreplayed (a
    takeover failed; retried when due). Touched only by the thread that polls the consumer."""

    first: float = RETRY_FIRST
    most: float = RETRY_MOST
    owned: set[int] = field(default_factory=set)
    parked: set[int] = field(default_factory=set)
    unreplayed: dict[int, Retry] = field(default_factory=dict)

    def park(self, partitions: Iterable[int]) -> None:
        """Assigned, being taken over: hold them until replayed."""
        self.parked.update(partitions)

    def takeover_failed(self, partitions: Iterable[int], now: float) -> float:
        """Park them, due again after a doubled backoff; returns the shortest of their backoffs."""
        backoffs = []
        for partition in partitions:
            previous = self.unreplayed.get(partition)
            backoff = min((self.first / 2 if previous is None else previous.backoff) * 2, self.most)
            self.unreplayed[partition] = Retry(now + backoff, backoff)
            self.parked.add(partition)
            backoffs.append(backoff)
        return min(backoffs, default=0.0)

    def taken_over(self, partitions: Iterable[int]) -> None:
        """Replayed: owned from now on, read on from where the replay ended."""
        for partition in partitions:
            self.unreplayed.pop(partition, None)
            self.parked.discard(partition)
            self.owned.add(partition)

    def retry_due(self, now: float, under_way: Collection[int] = ()) -> list[int]:
        """Unreplayed partitions whose retry is due and whose takeover is not under way, in order."""
        return sorted(partition for partition, retry in self.unreplayed.items()
                      if retry.due <= now and partition not in under_way)

    def revoked(self, partitions: Iterable[int]) -> None:
        """Lost: nothing of them is kept (their new owner replays them)."""
        for partition in partitions:
            self.owned.discard(partition)
            self.parked.discard(partition)
            self.unreplayed.pop(partition, None)


def to_park(partitions: Iterable[int], assigned: Collection[tuple[str, int]], topic: str) -> list[int]:
    """The partitions to assign and pause: those of ``topic`` the consumer has not assigned yet."""
    return [partition for partition in partitions if (topic, partition) not in assigned]


def to_unpark(partitions: Iterable[int], assigned: Collection[tuple[str, int]], topic: str) -> list[int]:
    """The partitions to unassign before assigning them again at their replayed offsets."""
    return [partition for partition in partitions if (topic, partition) in assigned]


def side_assignments(positions: Mapping[int, Mapping[str, int]], logical_topics: Iterable[str]
                     ) -> list[tuple[str, int, int]]:
    """What the side reader reads: (logical topic, partition, next offset) of every owned partition."""
    logicals = tuple(logical_topics)
    return [(logical, partition, offsets[logical])
            for partition, offsets in sorted(positions.items()) for logical in logicals]


@dataclass(frozen=True, slots=True)
class OwnershipTopics:
    """The group topic (logical name) whose partitions are owned, the logical topics the side
    reader follows for them, and the deployment's topic prefix."""

    prefix: str
    group: str
    side: tuple[str, ...]


class ConsumerOwnership:
    """An ``OwnershipBook`` carried out on the group consumer (``events``) and the ``side`` reader."""

    def __init__(self, events: EventReader, side: EventReader, topics: OwnershipTopics) -> None:
        self.book = OwnershipBook()
        self._events, self._side, self._topics = events, side, topics
        self._topic = topic_name(topics.prefix, topics.group)

    def park(self, partitions: list[int]) -> None:
        """Hold partitions being taken over, or whose takeover failed: assigned but paused."""
        self.book.park(partitions)
        self._pause(partitions)

    def takeover_failed(self, partitions: list[int], now: float) -> float:
        """Park them until their retry is due; returns the shortest backoff."""
        backoff = self.book.takeover_failed(partitions, now)
        self._pause(partitions)
        return backoff

    def taken_over(self, partitions: list[int], positions: Mapping[int, Mapping[str, int]]) -> None:
        """Read the replayed partitions on from their ``positions`` (next offsets per logical topic,
        of every owned partition: the side reader is assigned them all again)."""
        self.book.taken_over(partitions)
        consumer = self._events.consumer
        unpark = to_unpark(partitions, self._assigned(), self._topic)
        if unpark:
            consumer.incremental_unassign([TopicPartition(self._topic, partition) for partition in unpark])
        parts = [TopicPartition(self._topic, partition, positions[partition][self._topics.group])
                 for partition in partitions]
        consumer.incremental_assign(parts)
        consumer.resume(parts)  # librdkafka keeps a parked partition's pause across re-assignment
        self.reassign_side(positions)

    def retry_due(self, now: float, under_way: Collection[int] = ()) -> list[int]:
        return self.book.retry_due(now, under_way)

    def revoked(self, partitions: Iterable[int]) -> None:
        """Forget them (the client unassigns them itself once the rebalance callback returns)."""
        self.book.revoked(partitions)

    def reassign_side(self, positions: Mapping[int, Mapping[str, int]]) -> None:
        """Point the side reader at the owned partitions' other topics, from their next offsets."""
        self._side.assign(side_assignments(positions, self._topics.side))

    def _pause(self, partitions: list[int]) -> None:
        parts = [TopicPartition(self._topic, partition)
                 for partition in to_park(partitions, self._assigned(), self._topic)]
        if parts:
            self._events.consumer.incremental_assign(parts)
            self._events.consumer.pause(parts)

    def _assigned(self) -> set[tuple[str, int]]:
        return {(part.topic, part.partition) for part in self._events.consumer.assignment()}

