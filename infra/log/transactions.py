"""TransactionalSession: decisions and the offsets they were decided from commit atomically (KIP-447).

Errors are handled as librdkafka documents them for the transactional API: a
*retriable* error means call the same operation again; an error whose
``txn_requires_abort()`` is true means abort and start a new transaction; anything
else is fatal, and a producer fenced by a newer instance of its transactional id is
fatal too: the instance must stop acting on its partitions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from infra.log.closing import Closing
from infra.log.config import producer_config
from infra.log.partitioner import partition_for
from infra.log.producer import produce
from infra.log.reader import EventReader
from infra.log.records import routing_key
from infra.settings import Settings
from infra.topics import topic_name
from schemas import encode

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


Item = Any  # an event, or (event, key, partition_key)


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


class TransactionalSession(Closing):
    """One transactional producer; each :meth:`commit` is one Kafka transaction."""

    def __init__(self, settings: Settings, transactional_id: str, *, client_id: str | None = None,
                 timeout: float = 30.0, config: dict[str, Any] | None = None) -> None:
        self._settings = settings
        self._timeout = timeout
        self.transactional_id = transactional_id
        self._fenced: Fenced | None = None
        options = {**producer_config(settings, client_id or transactional_id),
                   "transactional.id": transactional_id, **(config or {})}
        self.producer = Producer(options)
        try:
            self._retrying(self.producer.init_transactions, timeout)
        except KafkaException as exc:
            raise Fenced(f"transactional id {transactional_id!r} could not start: {exc.args[0]}",
                         exc.args[0]) from None

    def commit(self, events: Iterable[Item], reader: EventReader | None,
               offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Write ``events`` and commit ``offsets`` (default: ``reader.positions()``) in one transaction.

        ``reader`` None writes events only (no consumed offsets). Raises TransactionAborted
        (nothing written; decide again) or Fenced (stop).
        """
        if self._fenced is not None:
            raise self._fenced
        try:
            self.producer.begin_transaction()
            for item in events:
                self._append(item)
            if reader is not None:
                self._send_offsets(reader, reader.positions() if offsets is None else offsets)
            self._retrying(self.producer.commit_transaction, self._timeout)
        except KafkaException as exc:
            self._fail(exc.args[0])
        except BaseException:
            # Not Kafka's doing (an event that cannot be encoded, an interrupt): write nothing.
            self._abort()
            raise

    def close(self) -> None:
        """Close the producer; librdkafka aborts a transaction still open."""
        if self._fenced is None:
            self.producer.close()
        # A fenced producer has nothing left to abort: it is destroyed with this session.


    def _append(self, item: Item) -> None:
        if isinstance(item, tuple):
            event, key, partition_key = item
        else:
            (key, partition_key), event = routing_key(item), item
        topic = topic_name(self._settings.topic_prefix, event.TOPIC)
        produce(self.producer, topic, encode(event), key, partition_for(partition_key, self._settings.partitions))

    def _send_offsets(self, reader: EventReader, offsets: dict[tuple[str, int], int]) -> None:
        if not offsets:
            return
        partitions = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        metadata = reader.consumer.consumer_group_metadata()
        self._retrying(lambda: self.producer.send_offsets_to_transaction(partitions, metadata, self._timeout))

    def _fail(self, error: KafkaError) -> None:
        outcome = failure_kind(error)
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
            self._fenced = Fenced(f"producer {self.transactional_id!r} could not abort: {exc.args[0]}", exc.args[0])
            raise self._fenced from None

    def _retrying(self, operation: Callable[..., Any], *args: Any) -> Any:
        """Call ``operation`` again while it fails with a retriable error, up to the session timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return operation(*args)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not error.retriable() or time.monotonic() >= deadline:
                    raise
                log.warning("%s: retriable error %s; retrying", self.transactional_id, error)
                time.sleep(0.1)
