"""Snapshot records in tock.snapshots: one per snapshot when it fits a record, else its parts and a
head (core/snapshot_parts.py); and reading back the latest complete one."""

from __future__ import annotations

from infra.log import RawRecord
from infra.log.latest import latest_value, newest_values
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES
from schemas import SNAPSHOTS
from services.scheduler.core.snapshot_parts import is_part_key, join, part_key, read_head, split

SNAPSHOT_RECORD_OVERHEAD = 64 * 1024  # key and batch framing around a snapshot's value, kept under the limits
RECORD_BYTES = SNAPSHOT_MAX_BYTES - SNAPSHOT_RECORD_OVERHEAD  # a snapshot value (or part) at most
# A part is smaller than a record may be: a reader looking for the head from the end of the
# partition reads the last few records whole, parts among them (no more than one whole snapshot).
PART_BYTES = 8 * 1024 * 1024
STALE_PARTS_UNKNOWN = 16  # parts deleted past the new snapshot's when the earlier ones' count is unknown


def snapshot_records(partition: int, value: bytes, earlier_parts: int | None,
                     record_bytes: int = RECORD_BYTES) -> list[RawRecord]:
    """The records of one snapshot of ``partition``: tombstones for the parts of an earlier snapshot
    beyond its own (``earlier_parts`` of them; None: not known, a few are deleted in case), then
    its parts if it needs any, then the snapshot or its head: the parts lie right before the head,
    where a reader looks for them first."""
    records = [RawRecord(SNAPSHOTS, partition, key, piece)
               for key, piece in split(value, partition, record_bytes, min(record_bytes, PART_BYTES))]
    parts = len(records) - 1 if len(records) > 1 else 0
    earlier = parts + STALE_PARTS_UNKNOWN if earlier_parts is None else earlier_parts
    stale = [RawRecord(SNAPSHOTS, partition, part_key(partition, index), None) for index in range(parts, earlier)]
    return [*stale, *records]


def parts_written(records: list[RawRecord]) -> dict[int, int]:
    """Per partition, how many snapshot parts ``records`` wrote (0: a snapshot in one record)."""
    counts: dict[int, int] = {}
    for record in records:
        counts.setdefault(record.partition, 0)
        if record.value is not None and is_part_key(record.partition, record.key):
            counts[record.partition] += 1
    return counts


def latest_snapshot(settings: Settings, partition: int, *, client_id: str, timeout: float) -> tuple[int, bytes] | None:
    """(offset, value) of the latest committed snapshot of ``partition`` (reassembled from its parts),
    None if there is none. Raises SnapshotRefused for a head whose parts are missing or do not
    match, KafkaException or TimeoutError when the topic cannot be read."""
    found = latest_value(settings, SNAPSHOTS, partition, str(partition), client_id=client_id, timeout=timeout)
    if found is None:
        return None
    offset, value = found
    head = read_head(value)
    if head is None:
        return found
    parts = newest_values(settings, SNAPSHOTS, partition, set(head.keys(partition)), before=offset,
                          client_id=client_id, timeout=timeout * head.parts)  # each part up to a record's size
    return offset, join(head, partition, {key: part for key, (_offset, part) in parts.items()})
