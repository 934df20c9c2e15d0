"""TransactionalSession: decisions and the offsets they were decided from commit atomically (KIP-447).

Errors are handled as librdkafka documents them for the transactional API: a
*retriable* error means call the same operation again; an error whose
``txn_requires_abort()`` is true means abort and start a new transaction; anything
else is fatal, and a producer fenced by a newer instance of its transactional id is
fatal too: the instance must stop acting on its partitions.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, TypeVarTuple

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from infra.log.abandoned import AbandonedProducers
from infra.log.closing import Closing
from infra.log.config import producer_config
from infra.log.producer import produce, produce_event
from infra.log.reader import EventReader
from infra.settings import Settings
from infra.topics import topic_name
from schemas import Event

log = logging.getLogger("tock.log")

# The group moved on without this member: its consumer-group metadata is stale (KIP-447).
_GROUP_MOVED_ON = {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                   KafkaError.FENCED_INSTANCE_ID, KafkaError.REBALANCE_IN_PROGRESS}


class Fenced(RuntimeError):
    """This producer may write no more: a newer instance took its transactional id, or a fatal error.

    The instance must stop acting on its partitions (and restart to act again).
    """

    def __init__(self, message: str, error: KafkaError | None = None) -> None:
        super().__init__(message)
        self.error = error


class TransactionAborted(RuntimeError):
    """The transaction was aborted: none of its records or offsets are visible. Decide again."""

    def __init__(self, message: str, error: KafkaError | None = None) -> None:
        super().__init__(message)
        self.error = error


class PartitionsLost(TransactionAborted):
    """Aborted because the consumer group rebalanced under this member (KIP-447 fencing).

    Its decisions were for partitions it may no longer own: drop them, poll the reader
    (which rejoins the group and reports the new assignment), then decide again.
    """


# An event to write, or (event, key, partition key) to write it under other keys than its route's.
Decision = Event | tuple[Event, str | None, str | None]
Result = TypeVar("Result")
Arguments = TypeVarTuple("Arguments")


class RawRecord(NamedTuple):
    """An already encoded record for a given partition of a logical topic (e.g. a scheduler snapshot)."""

    logical_topic: str
    partition: int
    key: str
    value: bytes | None  # None: a tombstone (a compacted topic then forgets the key)


class ExternalRecord(NamedTuple):
    """A record for a topic that is not Tock's (named as it is), partitioned by its key."""

    topic: str
    key: bytes | None
    value: bytes


def failure_kind(error: KafkaError) -> type[Fenced] | type[TransactionAborted]:
    """What a failed transactional call means, as librdkafka documents it.

    Fatal: the producer is done (Fenced). Requires abort: abort and decide again
    (PartitionsLost when the group moved on without us). Retriable errors are retried by
    the session until its timeout; one still failing then gives the transaction up. Any
    other error is treated as fatal, as librdkafka advises.
    """
    if error.fatal():
        return Fenced
    if error.txn_requires_abort() or error.retriable():
        return PartitionsLost if error.code() in _GROUP_MOVED_ON else TransactionAborted
    return Fenced


# How long past its own timeout a transactional call may block before the producer is
# deemed wedged (see TransactionalSession._bounded).
WEDGE_GRACE = 5.0


# Another producer took this transactional id: this instance must stop. Any other fatal
# error (e.g. INVALID_TXN_STATE after the coordinator restarted) only breaks this producer,
# and a new one with the same id carries on; ownership itself is fenced by the consumer
# group (KIP-447), not by the producer.
_TAKEN_OVER = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED}


class _Wedged(Exception):
    """A librdkafka call blocked past its timeout; the producer cannot be trusted any more.
    ``blocked`` is set when the call that blocked returns (None: no call is still running)."""

    def __init__(self, message: str, blocked: threading.Event | None = None) -> None:
        super().__init__(message)
        self.blocked = blocked


class TransactionalSession(Closing):
    """One transactional producer; each :meth:`commit` is one Kafka transaction."""

    def __init__(self, settings: Settings, transactional_id: str, *, client_id: str | None = None,
                 timeout: float = 30.0, config: dict[str, Any] | None = None) -> None:
        self._settings = settings
        self._timeout = timeout
        self.transactional_id = transactional_id
        self._fenced: Fenced | None = None
        self._options = {**producer_config(settings, client_id or transactional_id),
                         "transactional.id": transactional_id, **(config or {})}
        # Producers given up on, closed in the background; while too many are still closing, none is built.
        self._abandoned = AbandonedProducers(transactional_id)
        self.producer = Producer(self._options)
        self._needs_init = False
        self._init_unfinished = False  # the first init timed out (Kafka away at start): resumed at commit
        self._began = time.monotonic()  # when the current transaction began
        try:
            self._retrying(self.producer.init_transactions, timeout)
        except _Wedged as wedged:
            self._abandon_producer(wedged)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise Fenced(f"transactional id {transactional_id!r} could not start: {exc}", exc.args[0]) from None
            # Kafka unreachable or slow at start (a broker restarting, a loaded machine) is no reason
            # to stop: the init is resumed by the first commit, which aborts until it is done.
            log.warning("%s: transactional producer not ready yet (%s); trying again at the first commit",
                        transactional_id, exc.args[0])
            self._init_unfinished = True

    def commit(self, events: Iterable[Decision], reader: EventReader | None,
               offsets: dict[tuple[str, int], int] | None = None, raw: Iterable[RawRecord] = (),
               external: Iterable[ExternalRecord] = ()) -> None:
        """Write ``events``, ``raw`` records and ``external`` ones (to topics that are not Tock's) and commit
        ``offsets`` (default: ``reader.positions()``) in one transaction.

        ``reader`` None writes events only (no consumed offsets). Raises TransactionAborted
        (nothing written; decide again) or Fenced (stop).
        """
        if self._fenced is not None:
            raise self._fenced
        if self._init_unfinished:
            self._resume_init()
        if self._needs_init:
            self._restart_producer()
        try:
            self._commit_once(events, reader, offsets, raw, external)
        except _Wedged as wedged:
            self._abandon_producer(wedged)
            raise TransactionAborted(f"transaction abandoned: {wedged}") from None

    def _commit_once(self, events: Iterable[Decision], reader: EventReader | None,
                     offsets: dict[tuple[str, int], int] | None, raw: Iterable[RawRecord],
                     external: Iterable[ExternalRecord] = ()) -> None:
        try:
            self.producer.begin_transaction()
            self._began = time.monotonic()
            for topic, key, value in external:
                produce(self.producer, topic, value, key, -1)  # -1: the producer's partitioner, by key
            for record in raw:
                produce(self.producer, topic_name(self._settings.topic_prefix, record.logical_topic), record.value,
                        record.key, record.partition)
            written = set()
            for item in events:
                self._append(item)
                written.add(type(item[0] if isinstance(item, tuple) else item).__name__)
            if reader is not None:
                self._send_offsets(reader, reader.positions() if offsets is None else offsets)
            self._injected_stop(written)
            self._retrying(self.producer.commit_transaction, self._timeout)
        except KafkaException as exc:
            self._fail(exc.args[0])
        except BaseException:
            # Not Kafka's doing (an event that cannot be encoded, an interrupt): write nothing,
            # and let the caller see its own error even if the abort fails too.
            try:
                self._abort()
            except _Wedged as wedged:
                self._abandon_producer(wedged)
            raise

    def _injected_stop(self, written: set[str]) -> None:
        """Fault injection for tests (TOCK_FAULT_STOP_BEFORE_COMMIT): freeze this process inside
        its transaction, after the offsets were sent and before the commit, while the file exists (and,
        when the file names an event type, only in a transaction that writes one)."""
        marker = self._settings.fault_stop_before_commit
        if marker is not None and marker.exists() and _names_one_of(marker, written):
            log.warning("fault injection: %s exists, stopping inside the transaction", marker)
            os.kill(os.getpid(), signal.SIGSTOP)

    def close(self) -> None:
        """Close the producer; librdkafka aborts a transaction still open."""
        if self._fenced is not None or self._needs_init:
            return  # nothing of ours is open: a fenced or abandoned producer is dropped as it is
        try:
            self.producer.close()
        except KafkaException as exc:
            log.warning("%s: closing the producer: %s", self.transactional_id, exc.args[0])


    def _append(self, item: Decision) -> None:
        event, key, partition_key = item if isinstance(item, tuple) else (item, None, None)
        produce_event(self.producer, self._settings, event, key, partition_key)

    def _send_offsets(self, reader: EventReader, offsets: dict[tuple[str, int], int]) -> None:
        if not offsets:
            return
        partitions = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        metadata = reader.consumer.consumer_group_metadata()
        # Not retried: a timeout here is abortable, and calling again after a coordinator
        # change is where librdkafka blocks for good (librdkafka #5456, #5511).
        self._bounded(self.producer.send_offsets_to_transaction, partitions, metadata, self._timeout)

    def _fail(self, error: KafkaError) -> None:
        outcome = failure_kind(error)
        if outcome is Fenced and error.code() not in _TAKEN_OVER:
            # Fatal for this producer, but nobody else holds its id: a fresh one can go on.
            raise _Wedged(f"producer failed fatally: {error.str()}")
        if outcome is Fenced and self._outlived_its_timeout():
            # Our own transaction stayed open past its timeout (this process was frozen or cut off):
            # the coordinator aborted it and bumped the epoch, which fences this producer too. No
            # other instance took the id (ownership is fenced by the group generation anyway).
            raise _Wedged(f"fenced after our transaction outlived its timeout: {error.str()}")
        if outcome is Fenced and self._replaced_before:
            # After we replaced a wedged producer, the one fencing us is most likely our own
            # abandoned one, whose init_transactions went on in the background and finished
            # late. Being fenced by ourselves is no takeover: replace the producer again.
            raise _Wedged(f"fenced, most likely by this session's own abandoned producer: {error.str()}")
        if outcome is Fenced:
            self._fenced = Fenced(f"producer {self.transactional_id!r} is fenced or failed fatally: "
                                  f"{error.str()}; stop acting on its partitions and restart", error)
            log.error("%s", self._fenced)
            raise self._fenced
        log.warning("transaction of %s aborted: %s", self.transactional_id, error)
        self._abort()
        raise outcome(f"transaction aborted: {error.str()}", error) from None

    def _abort(self) -> None:
        try:
            self._retrying(self.producer.abort_transaction, self._timeout)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._STATE:  # no transaction was open
                return
            if exc.args[0].code() not in _TAKEN_OVER or self._replaced_before or self._outlived_its_timeout():
                raise _Wedged(f"abort failed: {exc.args[0].str()}") from None
            self._fenced = Fenced(f"producer {self.transactional_id!r} could not abort: {exc.args[0]}", exc.args[0])
            raise self._fenced from None

    def _retrying(self, operation: Callable[[*Arguments], Result], *args: *Arguments) -> Result:
        """Call ``operation`` again while it fails with a retriable error, up to the session timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return self._bounded(operation, *args)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() == KafkaError._CONFLICT:
                    # An earlier call is still running inside librdkafka past its timeout.
                    raise _Wedged(f"{error.str()}") from None
                if not error.retriable() or time.monotonic() >= deadline:
                    raise
                log.warning("%s: retriable error %s; retrying", self.transactional_id, error)
                time.sleep(0.1)

    def _bounded(self, operation: Callable[[*Arguments], Result], *args: *Arguments) -> Result:
        """Run a blocking librdkafka call, giving up on it past its timeout plus a grace period.

        librdkafka's send_offsets_to_transaction can block forever after the group
        coordinator went away and came back, ignoring its timeout (librdkafka #5456,
        #5511, open in 2.16). The call runs on a helper thread so this session can notice
        and replace the producer instead of hanging the service.
        """
        values: list[Result] = []
        errors: list[BaseException] = []
        finished = threading.Event()

        def call() -> None:
            try:
                values.append(operation(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                errors.append(exc)
            finally:
                finished.set()

        threading.Thread(target=call, name=f"txn-{self.transactional_id}", daemon=True).start()
        if not finished.wait(self._timeout + WEDGE_GRACE):
            raise _Wedged(f"{getattr(operation, '__name__', 'call')} blocked over "
                          f"{self._timeout + WEDGE_GRACE:.0f} s", finished)
        if errors:
            raise errors[0]
        return values[0]

    @property
    def abandoned(self) -> AbandonedProducers:
        """The producers this session gave up on, and how many of them are still closing."""
        return self._abandoned

    def _outlived_its_timeout(self) -> bool:
        timeout = float(self._options.get("transaction.timeout.ms", 60_000)) / 1000
        return time.monotonic() - self._began > timeout

    @property
    def _replaced_before(self) -> bool:
        return self._abandoned.abandoned > 0

    def _abandon_producer(self, wedged: _Wedged) -> None:
        log.error("%s: %s; replacing the producer (a new one with the same transactional id fences it "
                  "and aborts its open transaction)", self.transactional_id, wedged)
        self._abandoned.abandon(self.producer, str(wedged), after=wedged.blocked)
        self._needs_init = True

    def _resume_init(self) -> None:
        """Finish the first producer's init (librdkafka resumes a timed-out init_transactions when it is
        called again); TransactionAborted while Kafka is still unreachable."""
        try:
            self._retrying(self.producer.init_transactions, self._timeout)
        except _Wedged as wedged:
            self._init_unfinished = False
            self._abandon_producer(wedged)
            return
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise Fenced(f"transactional id {self.transactional_id!r} could not start: {exc}",
                             exc.args[0]) from None
            raise TransactionAborted(f"transactional producer not ready yet: {exc}") from None
        self._init_unfinished = False
        log.info("%s: transactional producer ready", self.transactional_id)

    def _restart_producer(self) -> None:
        """A fresh producer for this transactional id; TransactionAborted while Kafka is unreachable,
        or while too many abandoned producers are still closing (none is built then)."""
        if self._abandoned.full:
            raise TransactionAborted(f"{self._abandoned.closing} abandoned producers of {self.transactional_id!r} "
                                     "are still closing; no new producer until one has closed")
        self.producer = Producer(self._options)
        try:
            self._retrying(self.producer.init_transactions, self._timeout)
        except _Wedged as wedged:
            self._abandoned.abandon(self.producer, f"not ready: {wedged}", after=wedged.blocked)
            raise TransactionAborted(f"transactional producer not ready yet: {wedged}") from None
        except KafkaException as exc:
            self._abandoned.abandon(self.producer, f"not ready: {exc.args[0]}")
            raise TransactionAborted(f"transactional producer not ready yet: {exc}") from None
        self._needs_init = False
        log.info("%s: new transactional producer ready", self.transactional_id)


def _names_one_of(marker: Path, written: set[str]) -> bool:
    try:
        wanted = marker.read_text().strip()
    except OSError:
        return False
    return not wanted or wanted in written
