"""ClaimReader: reads a runner's tries from tock.events until each claim is decided, then watches
the tries it won for kill requests and deaths (a TaskDeclaredDead of a won try is obeyed as a kill
request: dead means stopped, services/runner/core/claim.py).

It starts where the tries were queued. The scheduler that launched a try hands it the offset of its
TaskQueued (``queued_offset``) when it read that record itself: the read starts at the earliest such
offset of the partition and decodes only these TaskQueued (in a burst of thousands of tries of one DAG,
none of the others'). Otherwise (a scheduler that restored the try from a snapshot, or an earlier
release's) it starts at ``offsets_for_times(queued_at - 1 s)``. ``queued_at``
is the scheduler's clock and tock.events is stamped by the broker's (LogAppendTime, so that a
runner's clock judges nothing): with the two in step, the offset found is at or before the
TaskQueued, and every TaskStarted or TaskKillRequested of the try comes after that, whatever
the runners' clocks say. A broker clock behind the scheduler's would put the start past the
TaskQueued, and a rival's TaskStarted out of sight: so the claim reads the TaskQueued of its
tries too, and a claim record met before it (or a partition with nothing since then) means the
read began too late; it begins again from further back (a minute, an hour, the beginning).
One consumer per runner, opened while the runner waits for its tries; one read per batch,
which starts while the runner's TaskStarted are still on their way (reading them back is
their acknowledgement). After the claim the consumer stays on the won tries' partitions,
from where the claim ended, and the supervision asks it, without waiting, for the kill
requests (and deaths) read so far (:meth:`ClaimReader.kill_requests`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace

from confluent_kafka import OFFSET_BEGINNING, KafkaException, Message, TopicPartition

from infra.log import EventReader, partition_for
from infra.log.closing import Closing
from infra.settings import Settings
from infra.topics import topic_name
from schemas import (
    EVENTS,
    DecodeError,
    TaskDeclaredDead,
    TaskKillRequested,
    TaskQueued,
    TaskStarted,
    decode,
    peek_type,
)
from services.runner.core.claim import ClaimRead, Claims, TryKey, kill_requests, try_key, unanchored, winners
from services.runner.every import Every

log = logging.getLogger("tock.runner")

# The broker answers a fetch as soon as a record is readable (fetch.min.bytes 1; a
# transaction's commit included), so the fetch wait only bounds a fetch that finds nothing:
# a claim is not slowed by it, and a runner watching its tries for hours sends two idle
# fetches a second, not a hundred.
_FETCH = {"fetch.wait.max.ms": 500, "fetch.error.backoff.ms": 50, "enable.partition.eof": False}
# Seconds before queued_at to look from, widened while the read proves to begin past a TaskQueued
# (the broker's clock behind the scheduler's); None: the partition's beginning.
_MARGINS: tuple[float | None, ...] = (1.0, 60.0, 3600.0, None)
_QUEUED = TaskQueued.__name__
_CLAIM_TYPES = frozenset({TaskStarted.__name__, TaskKillRequested.__name__, TaskDeclaredDead.__name__})
_KILL_TYPES = frozenset({TaskKillRequested.__name__, TaskDeclaredDead.__name__})  # dead means stopped
_BATCH = 1000  # records taken from the consumer's queue at once


class ClaimReader(Closing):
    """Reads claims and kill requests; :meth:`warm` opens the connection before a try is handed over."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = topic_name(settings.topic_prefix, EVENTS)
        self._reader = EventReader(settings, [], client_id="tock-runner-claim", config=_FETCH)
        self._consumer = self._reader.consumer
        self._watched: frozenset[TryKey] = frozenset()  # the tries won by the last claim, until stop_watching
        self._kills: dict[TryKey, str] = {}  # their kill requests read so far: try -> reason
        self._closed = False

    def warm(self, timeout: float = 10.0) -> None:
        """Connect and learn the topic's leaders now, so the claim pays no connection."""
        try:
            self._consumer.list_topics(self._topic, timeout=timeout)
        except KafkaException as error:  # the claim will wait for the broker itself
            log.warning("claim reader could not reach the broker yet: %s", error)

    def claim(self, own: Mapping[TryKey, str], queued_at: Mapping[TryKey, float],
              refused: Callable[[], Collection[TryKey]] = frozenset,
              queued_offsets: Mapping[TryKey, int] | None = None) -> Claims:
        """Read until every try of ``own`` (try -> our runner id) is decided; waits out a broker outage.
        Then watch the tries won for kill requests, until :meth:`stop_watching`.

        ``refused()``: our tries whose TaskStarted the broker refused, no longer waited for.
        ``queued_offsets``: the offset of a try's TaskQueued, where known (a negative one is not known).
        """
        self.stop_watching()
        exact = {key: offset for key, offset in (queued_offsets or {}).items() if key in own and offset >= 0}
        for margin in _MARGINS:
            # A read that began past a TaskQueued (never, from its own offset) looks again by time alone.
            decided = self._claim_from(margin, own, queued_at, refused, exact if margin == _MARGINS[0] else {})
            if decided is not None:
                claims, read = decided
                self._watch(claims.won, read)
                return claims
            log.warning("claim: the TaskQueued of a try was not where %g s before its queued_at finds it (the "
                        "broker's clock behind the scheduler's?): reading its partition again from further back",
                        margin)
        raise AssertionError("the last margin reads from the beginning, which is never too late")

    def _claim_from(self, margin: float | None, own: Mapping[TryKey, str], queued_at: Mapping[TryKey, float],
                    refused: Callable[[], Collection[TryKey]],
                    exact: Mapping[TryKey, int]) -> tuple[Claims, list[ClaimRead]] | None:
        """Read from ``margin`` seconds before each partition's earliest queued_at (from the earliest
        TaskQueued offset where every try of the partition has one) until every try is decided; None if
        the read began too late (past a try's TaskQueued)."""
        starts = self._start_offsets(queued_at, margin, exact)
        if starts is None:
            return None
        positions = {(partition_for(key[0], self._settings.partitions), offset) for key, offset in exact.items()}
        self._consumer.assign([TopicPartition(self._topic, partition, offset) for partition, offset in starts.items()])
        partitions = self._settings.partitions
        anchored = {key for key in own if starts[partition_for(key[0], partitions)] == OFFSET_BEGINNING}
        read: list[ClaimRead] = []
        queued: dict[TryKey, TaskQueued] = {}  # each try's TaskQueued, its context (read from the beginning too)
        claims, waiting = Claims(pending=frozenset(own)), Every(10.0)
        while not claims.decided:
            batch = _records(self._available(), _CLAIM_TYPES, own,
                             {key[0].encode() for key in own.keys() - queued - exact.keys()}, positions)
            # Earlier batches held nothing of a try not anchored yet (its TaskQueued anchors it, and a claim
            # record before that ended this read), so the new batch alone says whether it is read too late.
            if unanchored(batch, own.keys() - anchored):
                return None
            for record in batch:
                if isinstance(record, TaskQueued):
                    queued.setdefault(try_key(record), record)
            anchored |= queued.keys()
            read += batch
            gone = refused()
            claims = winners(read, {key: runner_id for key, runner_id in own.items() if key not in gone})
            if not claims.decided and waiting.due():
                log.warning("claim: still waiting to read the TaskStarted of %d tries (broker down, or an open "
                            "transaction holding the partition back?)",
                            len(claims.pending))
        return replace(claims, queued=queued), read

    def kill_requests(self) -> Mapping[TryKey, str]:
        """The kill requests and deaths of the tries won by the last claim, read so far (try -> reason);
        never waits."""
        if self._watched:
            for key, reason in kill_requests(_records(self._queued(), _KILL_TYPES, self._watched),
                                             self._watched).items():
                self._kills.setdefault(key, reason)
        return self._kills

    def stop_watching(self) -> None:
        """The won tries have ended: read nothing more for them."""
        if self._watched:
            self._watched = frozenset()
            self._consumer.unassign()
        self._kills = {}

    def close(self) -> None:
        """Close the consumer (again: nothing)."""
        if not self._closed:
            self._closed = True
            self._reader.close()

    def _watch(self, won: frozenset[TryKey], read: list[ClaimRead]) -> None:
        """Keep reading from where the claim ended, for the kill requests of the tries won (some may be
        read already: after our TaskStarted, in what the claim read)."""
        self._watched, self._kills = won, kill_requests(read, won)
        if not won:
            self._consumer.unassign()

    def _start_offsets(self, queued_at: Mapping[TryKey, float], margin: float | None,
                       exact: Mapping[TryKey, int]) -> dict[int, int] | None:
        """Per partition, the earliest TaskQueued offset of its tries if ``exact`` has all of them;
        else the first offset appended at or after its earliest queued_at less ``margin`` (None: from
        the beginning); None if a partition holds nothing since then (its TaskQueued is older: the
        broker's clock is behind)."""
        known = exact_starts(queued_at.keys(), exact, self._settings.partitions)
        earliest = {partition: at for partition, at in earliest_queued(queued_at, self._settings.partitions).items()
                    if partition not in known}
        if margin is None:
            return {**dict.fromkeys(earliest, OFFSET_BEGINNING), **known}
        asks = [TopicPartition(self._topic, partition, int((at - margin) * 1000))
                for partition, at in earliest.items() if at > 0]
        found = {tp.partition: tp.offset for tp in self._offsets_for_times(asks)}
        if any(offset < 0 for offset in found.values()):
            return None
        return {**{partition: found.get(partition, OFFSET_BEGINNING) for partition in earliest}, **known}

    def _offsets_for_times(self, asks: list[TopicPartition]) -> list[TopicPartition]:
        waiting = Every(10.0)
        while asks:
            try:
                answer = self._consumer.offsets_for_times(asks, timeout=5.0)
                if not any(tp.error for tp in answer):
                    return answer
                problem = "; ".join(str(tp.error) for tp in answer if tp.error)
            except KafkaException as error:
                problem = str(error)
            if waiting.due():
                log.warning("claim: cannot look up where the tries were queued (%s); retrying", problem)
            time.sleep(0.1)
        return []

    def _available(self) -> list[Message]:
        """The records there now, waiting up to 50 ms for the first (consume() would wait out its timeout)."""
        first = self._consumer.poll(0.05)
        return [] if first is None else [first, *self._consumer.consume(_BATCH, 0)]

    def _queued(self) -> list[Message]:
        """Every record the consumer has fetched already, without waiting for more."""
        messages: list[Message] = []
        while len(batch := self._consumer.consume(_BATCH, 0)) == _BATCH:
            messages += batch
        return messages + batch


def earliest_queued(queued_at: Mapping[TryKey, float], partitions: int) -> dict[int, float]:
    """Per partition of tock.events, the earliest ``queued_at`` of its tries (0: unknown, read it all)."""
    earliest: dict[int, float] = {}
    for key, at in queued_at.items():
        partition = partition_for(key[0], partitions)
        earliest[partition] = min(at, earliest.get(partition, at))
    return earliest


def exact_starts(tries: Iterable[TryKey], exact: Mapping[TryKey, int], partitions: int) -> dict[int, int]:
    """Per partition whose every try has its TaskQueued offset in ``exact``, the earliest of them."""
    starts: dict[int, int] = {}
    unknown: set[int] = set()
    for key in tries:
        partition = partition_for(key[0], partitions)
        if key in exact:
            starts[partition] = min(exact[key], starts.get(partition, exact[key]))
        else:
            unknown.add(partition)
    return {partition: offset for partition, offset in starts.items() if partition not in unknown}


def _records(messages: Iterable[Message], types: frozenset[str], tries: Collection[TryKey],
             queued_of: Collection[bytes] = (), queued_at: Collection[tuple[int, int]] = ()) -> list[ClaimRead]:
    """The records of these types and tries among the messages, in order (others' bodies stay undecoded),
    with the TaskQueued of the DAGs keyed ``queued_of`` and those at ``queued_at`` (partition, offset)."""
    found = []
    for message in messages:
        if message.error() is not None:
            log.debug("claim read: %s", message.error())
            continue
        kind = peek_type(message.value())
        if kind in types or (kind == _QUEUED and (message.key() in queued_of
                                                   or (message.partition(), message.offset()) in queued_at)):
            event = _decoded(message.value())
            if event is not None and try_key(event) in tries:
                found.append(event)
    return found


def _decoded(value: bytes) -> ClaimRead | None:
    try:
        return decode(value)
    except DecodeError as error:  # the scheduler dead-letters it; a claim only needs the others
        log.warning("claim: skipping an undecodable %s record: %s", peek_type(value), error)
        return None
