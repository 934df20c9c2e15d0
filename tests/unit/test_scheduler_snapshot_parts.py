"""A snapshot over a record's limit as parts and a head (core/snapshot_parts.py, snapshot_store.py):
split and joined back, refused when a part is missing or of another snapshot."""

from __future__ import annotations

import os

import pytest

from infra.log import RawRecord
from infra.settings import load_settings
from schemas import SNAPSHOTS
from services.scheduler.core.snapshot import MAGIC, SnapshotRefused
from services.scheduler.core.snapshot_parts import HEAD_MAGIC, is_part_key, join, read_head, split
from services.scheduler.holdings import Holdings
from services.scheduler.memory import PartitionMemory
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.snapshot_store import parts_written, snapshot_records
from services.scheduler.snapshots import Snapshots

VALUE = MAGIC + os.urandom(10_000 - len(MAGIC))  # 10,000 bytes


def test_a_snapshot_that_fits_is_one_record_under_the_partitions_key_as_before():
    assert split(VALUE, 3, len(VALUE)) == [("3", VALUE)]
    assert read_head(VALUE) is None


def test_a_bigger_one_is_parts_then_a_head_and_joins_back():
    records = split(VALUE, 3, 1_256)
    keys = [key for key, _value in records]
    assert keys == [f"3/{index}" for index in range(10)] + ["3"]  # 1,000 bytes a part: 10 parts, then the head
    assert all(len(value) <= 1_256 for _key, value in records)
    head = read_head(records[-1][1])
    assert head is not None and head.parts == 10 and head.size == len(VALUE)
    assert join(head, 3, dict(records[:-1])) == VALUE


def test_a_missing_part_a_part_of_another_snapshot_or_a_bad_head_is_refused():
    records = dict(split(VALUE, 3, 1_256))
    head = read_head(records.pop("3"))
    assert head is not None
    with pytest.raises(SnapshotRefused, match="part 9 is missing"):
        join(head, 3, {key: value for key, value in records.items() if key != "3/9"})
    other = dict(split(MAGIC + os.urandom(10_000), 3, 1_256))
    with pytest.raises(SnapshotRefused, match="part 4 is of another snapshot"):
        join(head, 3, {**records, "3/4": other["3/4"]})
    with pytest.raises(SnapshotRefused, match="unreadable head"):
        read_head(HEAD_MAGIC + b"{not json")


def test_part_keys_are_the_partitions_own():
    assert is_part_key(3, "3/0") and is_part_key(3, "3/12")
    assert not is_part_key(3, "3") and not is_part_key(3, "13/0") and not is_part_key(3, "3/x")


def test_records_delete_parts_an_earlier_bigger_snapshot_left_and_end_with_the_head():
    big = snapshot_records(5, VALUE, None, record_bytes=1_256)
    assert parts_written(big) == {5: 10}
    assert big[-1].key == "5" and big[-1].value.startswith(HEAD_MAGIC)
    # Deletions first, then the parts right before their head (where a reader looks first).
    assert [record.key for record in big] == [f"5/{index}" for index in [*range(10, 26), *range(10)]] + ["5"]
    assert [record.key for record in big if record.value is None] == [f"5/{index}" for index in range(10, 26)]
    whole = snapshot_records(5, VALUE, 10)
    assert whole[-1] == RawRecord(SNAPSHOTS, 5, "5", VALUE) and parts_written(whole) == {5: 0}
    assert [record.key for record in whole[:-1]] == [f"5/{index}" for index in range(10)]
    assert all(record.value is None for record in whole[:-1])
    assert snapshot_records(5, VALUE, 0) == [RawRecord(SNAPSHOTS, 5, "5", VALUE)]


def test_the_writer_deletes_unknown_parts_once_per_takeover_then_only_those_it_wrote():
    memory = PartitionMemory(2)
    holdings = Holdings(memories={2: memory})
    snapshots = Snapshots(load_settings({}), holdings, SchedulerMetrics(), on=True)
    first = snapshots.records([2])
    assert [record.key for record in first] == [f"2/{index}" for index in range(16)] + ["2"]
    snapshots.written(first)
    assert [record.key for record in snapshots.records([2])] == ["2"]  # it knows: no parts were written
    holdings.memories[2] = PartitionMemory(2)  # taken over again: what was written since is not known
    assert len(snapshots.records([2])) == 17
