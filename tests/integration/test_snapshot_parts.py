"""Snapshots over the record limit of tock.snapshots on the real broker: written as parts and a head
in one transaction, read back whole; a partition restores from them; a later snapshot wins and an
incomplete one means a full replay."""

from __future__ import annotations

import logging
import os

import pytest

from infra.log import RawRecord, TransactionalSession
from infra.log.latest import latest_value
from infra.topics import SNAPSHOT_MAX_BYTES
from schemas import SNAPSHOTS
from services.scheduler.core import SchedulerState, fold
from services.scheduler.core.snapshot import MAGIC
from services.scheduler.memory import PartitionMemory, restore, snapshot_of
from services.scheduler.snapshot_store import PART_BYTES, latest_snapshot, parts_written, snapshot_records
from tests import synthetic_history as synthetic
from tests.scenarios.scheduler_support import wait_until

pytestmark = pytest.mark.integration

PARTITION = 1
POSITIONS = {"dags": 1, "events": 200, "heartbeats": 3}
PART_RECORD = 1_024  # records this small make the small snapshot of these tests several parts


def session_of(settings) -> TransactionalSession:
    return TransactionalSession(settings, f"{settings.topic_prefix}snapshot-parts-test",
                                config={"message.max.bytes": SNAPSHOT_MAX_BYTES})


def busy_snapshot() -> tuple[SchedulerState, bytes]:
    state = fold(SchedulerState(), synthetic.history(["etl", "load"], runs_per_dag=20, tasks=3, open_tries=3))
    return state, snapshot_of(PartitionMemory(PARTITION, state, dict(POSITIONS)))


def test_a_snapshot_larger_than_a_record_of_the_topic_is_written_and_read_back_whole(kafka_settings):
    value = MAGIC + os.urandom(SNAPSHOT_MAX_BYTES + 1024 * 1024)  # random: nothing compresses it under the limit
    records = snapshot_records(PARTITION, value, 0)
    assert len(records) == 10 and all(len(record.value) <= PART_BYTES for record in records)  # 9 parts, a head
    session = session_of(kafka_settings)
    try:
        session.commit([], None, raw=records)
    finally:
        session.close()
    # A commit returns before its markers are written: read once the head is readable (read_committed).
    wait_until(lambda: _head_offset(kafka_settings) >= 0, 30, "the snapshot's head to be readable")
    offset, found = latest_snapshot(kafka_settings, PARTITION, client_id="test-parts", timeout=60)
    assert found == value and offset == 9  # the head, after its parts


def test_a_partition_restores_from_a_snapshot_in_parts_and_then_from_a_later_whole_one(kafka_settings):
    state, value = busy_snapshot()
    session = session_of(kafka_settings)
    try:
        records = snapshot_records(PARTITION, value, None, record_bytes=PART_RECORD)
        parts = parts_written(records)[PARTITION]
        session.commit([], None, raw=records)
        wait_until(lambda: _head_offset(kafka_settings) >= 0, 30, "the snapshot's head to be readable")
        [memory] = restore(kafka_settings, [PARTITION]).values()
        assert memory.state == state and memory.positions == POSITIONS and parts >= 3
        later = fold(state, synthetic.finished_run("etl", 99, 3, 9_000.0))
        written = snapshot_records(PARTITION, snapshot_of(PartitionMemory(PARTITION, later, dict(POSITIONS))), parts)
        assert len(written) == parts + 1
        first_head = _head_offset(kafka_settings)
        session.commit([], None, raw=written)  # one record, its old parts deleted
        # A commit returns before its markers are written: read once the new head is readable (read_committed).
        wait_until(lambda: _head_offset(kafka_settings) > first_head, 30, "the later snapshot's head to be readable")
        [memory] = restore(kafka_settings, [PARTITION]).values()
        assert memory.state == later
    finally:
        session.close()


def test_a_head_whose_parts_are_not_there_means_a_full_replay(kafka_settings, caplog):
    _state, value = busy_snapshot()
    *parts, head = snapshot_records(PARTITION, value, 0, record_bytes=PART_RECORD)
    session = session_of(kafka_settings)
    try:
        session.commit([], None, raw=[*parts[1:], head])  # part 0 lost (it never is: one transaction)
        caplog.set_level(logging.WARNING, logger="tock.scheduler")
        assert restore(kafka_settings, [PARTITION]) == {}
        assert "part 0 is missing: replaying the full history" in caplog.text
        first_head = _head_offset(kafka_settings)
        mixed = RawRecord(SNAPSHOTS, PARTITION, f"{PARTITION}/1", b"TOCKSNAP-PART\n{}\nof another snapshot")
        session.commit([], None, raw=[parts[0], mixed, *parts[2:], head])
        # A commit returns before its markers are written: read once the new head is readable (read_committed).
        wait_until(lambda: _head_offset(kafka_settings) > first_head, 30, "the second snapshot's head to be readable")
        assert restore(kafka_settings, [PARTITION]) == {}
        assert "part 1 is of another snapshot" in caplog.text
    finally:
        session.close()


def _head_offset(settings) -> int:
    """Where the latest head of the partition's snapshot is, as a read_committed reader sees it."""
    found = latest_value(settings, SNAPSHOTS, PARTITION, str(PARTITION), client_id="test-parts", timeout=60)
    return -1 if found is None else found[0]
