"""Snapshot records on the real broker: written raw inside a transaction, read back newest first."""

from __future__ import annotations

import pytest

from infra.log import KafkaEventLog, RawRecord, TransactionalSession
from infra.log.latest import latest_value
from schemas import SNAPSHOTS
from tests.integration.log_helpers import queued

pytestmark = pytest.mark.integration


def latest(settings, partition: int = 1):
    found = latest_value(settings, SNAPSHOTS, partition, str(partition), client_id="test-latest")
    return None if found is None else found[1]


def test_an_empty_partition_has_no_latest_value(kafka_settings):
    assert latest(kafka_settings) is None


def test_the_newest_committed_value_of_the_key_wins_over_older_ones_and_other_keys(kafka_settings):
    session = TransactionalSession(kafka_settings, f"{kafka_settings.topic_prefix}snapshots-test")
    try:
        for number in range(40):  # more than the first window read back from the end
            session.commit([], None, raw=[RawRecord(SNAPSHOTS, 1, "1", b"value %d" % number)])
        session.commit([], None, raw=[RawRecord(SNAPSHOTS, 1, "other", b"another key")])
        assert latest(kafka_settings) == b"value 39"
    finally:
        session.close()


def test_a_snapshot_in_an_aborted_transaction_is_never_read(kafka_settings):
    session = TransactionalSession(kafka_settings, f"{kafka_settings.topic_prefix}snapshots-test")
    try:
        session.commit([], None, raw=[RawRecord(SNAPSHOTS, 1, "1", b"committed")])
        # The raw record goes out first; then an event that cannot be encoded aborts the transaction.
        with pytest.raises((TypeError, AttributeError)):
            session.commit([queued("a"), object()], None, raw=[RawRecord(SNAPSHOTS, 1, "1", b"aborted")])
        assert latest(kafka_settings) == b"committed"
    finally:
        session.close()


def test_a_tombstone_means_no_snapshot(kafka_settings):
    with KafkaEventLog(kafka_settings, client_id="test-snapshots") as event_log:
        event_log.append_raw(SNAPSHOTS, b"old", "1", 1)
        event_log.append_raw(SNAPSHOTS, None, "1", 1)
    assert latest(kafka_settings) is None
