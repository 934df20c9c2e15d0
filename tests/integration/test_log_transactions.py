"""Contract tests of TransactionalSession against the real broker: KIP-447 fencing and zombie fencing."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from infra.log import (
    EventReader,
    Fenced,
    KafkaEventLog,
    PartitionsLost,
    TransactionAborted,
    TransactionalSession,
    replay,
)
from infra.settings import Settings
from infra.topics import TopicNames
from schemas import EVENTS
from tests.integration.log_helpers import queued, wait_for

pytestmark = pytest.mark.integration

DAG_IDS = ["a", "b", "c", "d", "e", "f"]
# Short group timeouts so a member that stops polling is evicted within seconds.
GROUP_CONFIG = {"session.timeout.ms": 6000, "max.poll.interval.ms": 6000, "heartbeat.interval.ms": 500}


class Member:
    """One consumer-group member with its own transactional session, as a scheduler has."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.assigned: set[tuple[str, int]] = set()
        self.reader = EventReader(settings, [EVENTS], group_id=f"{settings.topic_prefix}schedulers",
                                  client_id=name, config=GROUP_CONFIG,
                                  on_assign=self.assigned.update, on_revoke=self.assigned.difference_update)
        self.session = TransactionalSession(settings, f"{settings.topic_prefix}{name}")
        self.records: list = []

    def poll(self) -> bool:
        """Serve the group protocol and keep what was read; True (for wait_for's sake)."""
        self.records.extend(self.reader.poll(0.2))
        return True

    def owns(self, count: int) -> bool:
        return self.poll() and len(self.assigned) == count

    def close(self) -> None:
        self.session.close()
        self.reader.close()


@pytest.fixture
def members(kafka_settings: Settings):
    with KafkaEventLog(kafka_settings) as log:
        for dag_id in DAG_IDS:
            log.append(queued(dag_id))
    created: dict[str, Member] = {}
    yield lambda name: created.setdefault(name, Member(kafka_settings, name))
    for member in created.values():
        member.close()


def test_a_member_that_lost_a_rebalance_cannot_commit(kafka_settings: Settings, members) -> None:
    old = members("old")
    wait_for(lambda: old.poll() and len(old.records) == len(DAG_IDS), "the old member to read everything")
    assert len(old.assigned) == kafka_settings.partitions

    # A new member joins while the old one is stuck (not polling): the group rebalances
    # without it once its poll interval passes, and the new member owns every partition.
    new = members("new")
    wait_for(lambda: new.owns(kafka_settings.partitions), "the new member to own every partition")

    with pytest.raises((PartitionsLost, Fenced)):
        old.session.commit([queued("a", task_id="stale-decision")], old.reader)

    wait_for(lambda: new.poll() and len(new.records) == len(DAG_IDS), "the new member to read everything")
    new_records = new.records
    new.session.commit([queued(record.key, task_id="decision") for record in new_records], new.reader)
    # A commit returns before its markers are written: read until they are (read_committed), then judge.
    wait_for(lambda: [record.event.task_id for record in replay(kafka_settings, EVENTS)].count("decision")
             == len(DAG_IDS), "the new member's decisions to be readable")
    task_ids = [record.event.task_id for record in replay(kafka_settings, EVENTS)]
    assert "stale-decision" not in task_ids
    assert task_ids.count("decision") == len(DAG_IDS)
    assert _committed(kafka_settings) == {partition: end for partition, end in
                                          _consumed_ends(kafka_settings, new_records).items()}


def test_the_old_member_recovers_by_polling_after_losing_its_partitions(kafka_settings: Settings, members) -> None:
    old = members("old")
    wait_for(lambda: old.poll() and len(old.records) == len(DAG_IDS), "the old member to read everything")
    new = members("new")
    wait_for(lambda: new.owns(kafka_settings.partitions), "the new member to own every partition")
    with pytest.raises(TransactionAborted):
        old.session.commit([queued("a", task_id="stale-decision")], old.reader)

    # Polling rejoins the group; the two members share the partitions and may both commit.
    wait_for(lambda: old.poll() and new.poll() and old.assigned and new.assigned
             and len(old.assigned | new.assigned) == kafka_settings.partitions
             and not old.assigned & new.assigned, "the partitions to be shared")
    old.session.commit([queued("a", task_id="fresh-decision")], old.reader)
    assert "fresh-decision" in [record.event.task_id for record in replay(kafka_settings, EVENTS)]


def test_a_newer_instance_of_a_transactional_id_fences_the_older(kafka_settings: Settings) -> None:
    transactional_id = f"{kafka_settings.topic_prefix}scheduler-1"
    older = TransactionalSession(kafka_settings, transactional_id)
    older.commit([queued("a", task_id="before-takeover")], None)
    newer = TransactionalSession(kafka_settings, transactional_id)
    try:
        with pytest.raises(Fenced):
            older.commit([queued("a", task_id="zombie")], None)
        with pytest.raises(Fenced):  # and it stays fenced
            older.commit([queued("a", task_id="zombie-again")], None)
        newer.commit([queued("a", task_id="after-takeover")], None)
    finally:
        older.close()
        newer.close()

    task_ids = [record.event.task_id for record in replay(kafka_settings, EVENTS)]
    assert task_ids == ["before-takeover", "after-takeover"]


def _committed(settings: Settings) -> dict[int, int]:
    topic = TopicNames(settings.topic_prefix)[EVENTS]
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": f"{settings.topic_prefix}schedulers"})
    try:
        partitions = consumer.committed([TopicPartition(topic, p) for p in range(settings.partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in partitions if tp.offset >= 0}
    finally:
        consumer.close()


def _consumed_ends(settings: Settings, records) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in records:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


def _commit_retrying(session: TransactionalSession, task_id: str, attempts: int = 10) -> None:
    """Commit one event as a scheduler does: an aborted transaction is decided again. With a 1 s
    transaction timeout, a loaded machine (CI under a busy CPU) once timed a commit out before it was
    sent; only the frozen commit's outcome is what the test is about."""
    for _ in range(attempts - 1):
        try:
            session.commit([queued("a", task_id=task_id)], None)
            return
        except TransactionAborted:
            continue
    session.commit([queued("a", task_id=task_id)], None)


@pytest.mark.timeout(180)
def test_a_session_frozen_inside_its_transaction_past_the_timeout_goes_on(kafka_settings: Settings,
                                                                        monkeypatch) -> None:
    """Its coordinator aborts the expired transaction and bumps the epoch, which fences the producer
    as a newer instance would; nobody else holds the id, so the session replaces its producer and
    goes on (a scheduler frozen past its session timeout used to exit 3 when thawed: the soak's
    finding). Ownership stays fenced by the group generation."""
    session = TransactionalSession(kafka_settings, f"{kafka_settings.topic_prefix}frozen",
                                   config={"transaction.timeout.ms": 1000})
    _commit_retrying(session, "before")
    frozen = iter([True])
    monkeypatch.setattr(TransactionalSession, "_injected_stop",
                        lambda self, _written: next(frozen, False) and time.sleep(20))  # past the coordinator's sweep
    with pytest.raises(TransactionAborted):  # not Fenced
        session.commit([queued("a", task_id="frozen")], None)
    _commit_retrying(session, "after")
    session.close()
    task_ids = [record.event.task_id for record in replay(kafka_settings, EVENTS)]
    assert task_ids == ["before", "after"]
