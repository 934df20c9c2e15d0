"""``tock lineage`` with the Kafka transport: OpenLineage run events written to a topic exactly once.

Guarantee: every lineage event the core derives from the committed log (services/lineage/core) is in the
output topic exactly once, for readers with ``isolation.level=read_committed``, whatever is killed when: each
batch of events is written in one Kafka transaction that also commits the offsets of tock.events it was
derived from (KIP-447, with the group's metadata, as the monitor commits its decisions). A transaction that
does not commit (the emitter killed, frozen past its timeout, or fenced after losing partitions in a
rebalance) leaves neither its events nor its offsets, and the next owner derives the same events, byte for
byte, from the same records. The emitter's name is its transactional id, so an emitter restarted under its
name aborts what its previous life left open at once. A read_uncommitted reader may see the records of
aborted transactions: read the topic read_committed.

Emitters share one consumer group (``<prefix>tock-lineage``); run any number, each with its own name. On being
assigned a partition an emitter rebuilds its fold by reading tock.events from the start up to the offset its
group committed (nothing is emitted for those records: their events are in the topic already), then emits
for every record after it.

The records are the bytes openlineage-python's transports write (``Serde.to_json`` of its ``RunEvent``) under
the key its KafkaTransport gives a run event (``run:<namespace>/<dag_id>``: a DAG's events stay in order in
one partition). The KafkaTransport itself is not used: its producer cannot commit consumer offsets in its
transactions, which is what makes the output exactly once.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.broker_config import replication_for
from infra.log import EventReader, ExternalRecord, PartitionsLost, TransactionAborted, TransactionalSession
from infra.settings import Settings
from infra.topics import topic_name
from schemas import EVENTS
from services.lineage.config import LineageSettings
from services.lineage.folding import PartitionLineage, rebuild
from services.lineage.run_events import message_key, to_json

log = logging.getLogger("tock.lineage")

POLL_WAIT = 0.5
BATCH = 5000


class KafkaLineage:
    """One emitter of the group. ``run()`` until ``stop()``."""

    def __init__(self, settings: Settings, lineage: LineageSettings, name: str) -> None:
        self.settings, self.lineage, self.name = settings, lineage, name
        self.group_id = f"{settings.topic_prefix}tock-lineage"
        self.folds: dict[int, PartitionLineage] = {}
        self.fresh: set[int] = set()  # assigned, fold not rebuilt yet
        self.emitted = 0  # lineage events committed by this instance
        self._events_topic = topic_name(settings.topic_prefix, EVENTS)
        self._stop = threading.Event()

    def run(self) -> None:
        """Join the group and emit until stopped. Raises Fenced if another emitter took this name."""
        ensure_output_topic(self.settings, self.lineage.topic)
        timeout_ms = int(self.lineage.session_timeout * 1000)
        self.session = TransactionalSession(self.settings, f"{self.settings.topic_prefix}tock-lineage-{self.name}",
                                            config={"transaction.timeout.ms": timeout_ms})
        self.reader = EventReader(self.settings, [EVENTS], group_id=self.group_id, on_assign=self._assigned,
                                  on_revoke=self._revoked, client_id=f"tock-lineage-{self.name}",
                                  config={"partition.assignment.strategy": "cooperative-sticky",
                                          "session.timeout.ms": timeout_ms,
                                          "heartbeat.interval.ms": max(100, timeout_ms // 5)})
        log.info("lineage emitter %s: %s -> Kafka topic %s", self.name, self._events_topic, self.lineage.topic)
        try:
            while not self._stop.is_set():
                self.step()
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> None:
        """Poll, rebuild what was just assigned, derive the batch's events, commit them with its offsets."""
        records = self.reader.poll(POLL_WAIT, BATCH)
        self._rebuild_fresh()
        outputs: list[ExternalRecord] = []
        for record in records:
            fold = self.folds.get(record.partition)
            if fold is None or record.offset < fold.next_offset:
                continue  # not ours (any more), or folded by the rebuild already
            outputs += [ExternalRecord(self.lineage.topic, message_key(item).encode(), to_json(item).encode())
                        for item in fold.apply(record)]
        if records:
            self._commit(outputs)

    def _commit(self, outputs: list[ExternalRecord]) -> None:
        offsets = {(self._events_topic, partition): fold.next_offset for partition, fold in self.folds.items()}
        try:
            self.session.commit([], self.reader, offsets, external=outputs)
        except TransactionAborted as error:
            kind = "partitions moved" if isinstance(error, PartitionsLost) else "aborted"
            log.warning("lineage not committed (%s: %s); deriving it again", kind, error)
            self._start_over()
            return
        self.emitted += len(outputs)

    def _start_over(self) -> None:
        """After a transaction that did not commit: every owned partition is rebuilt up to what its group
        committed and read again from there (its fold went past what was committed)."""
        self.fresh |= set(self.folds)
        self.folds.clear()
        self._stop.wait(0.1)  # not a busy loop while the group settles

    def _rebuild_fresh(self) -> None:
        if not self.fresh:
            return
        partitions = sorted(self.fresh)
        try:
            committed = self.reader.consumer.committed(
                [TopicPartition(self._events_topic, partition) for partition in partitions],
                timeout=2 * self.lineage.session_timeout + 10)
        except KafkaException as error:  # offsets held by an open transaction of a previous owner: later
            log.warning("partitions %s: committed offsets not readable yet (%s); trying again", partitions, error)
            return
        starts = {part.partition: max(part.offset, 0) for part in committed}
        for partition in partitions:
            start = starts.get(partition, 0)
            try:  # read on from there: records polled before the rebuild were skipped, or are past it
                self.reader.rewind({(self._events_topic, partition): start})
            except KafkaException as error:
                log.warning("partition %d: cannot read it again from offset %d yet (%s)", partition, start, error)
                continue
            self.folds[partition] = rebuild(self.settings, partition, start, self.lineage.config,
                                            f"tock-lineage-{self.name}")
            self.fresh.discard(partition)
            log.info("partition %d: lineage fold rebuilt from %d records; emitting from offset %d", partition,
                     self.folds[partition].state.folded, start)

    # -- the group's callbacks (inside poll) ---------------------------------------------------------------
    def _assigned(self, assigned: list[tuple[str, int]]) -> None:
        self.fresh |= {partition for _topic, partition in assigned}

    def _revoked(self, revoked: list[tuple[str, int]]) -> None:
        for _topic, partition in revoked:
            self.folds.pop(partition, None)
            self.fresh.discard(partition)

    def _close(self) -> None:
        for closing in (self.reader.close, self.session.close):
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)
        log.info("lineage emitter %s stopped (%d lineage events committed)", self.name, self.emitted)


def ensure_output_topic(settings: Settings, topic: str, timeout: float = 30.0) -> None:
    """Create the lineage topic if it is missing: TOCK_PARTITIONS partitions, replicated as the cluster allows."""
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    cluster = admin.list_topics(timeout=timeout)
    if topic in cluster.topics:
        return
    replicas, min_isr = replication_for(len(cluster.brokers))
    new = NewTopic(topic, num_partitions=settings.partitions, replication_factor=replicas,
                   config={"min.insync.replicas": str(min_isr), "retention.ms": "-1"})
    for future in admin.create_topics([new], operation_timeout=timeout).values():
        try:
            future.result(timeout)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another emitter made it meanwhile
                raise
