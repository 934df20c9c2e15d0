"""A snapshot too big for one record of tock.snapshots, written as several: its parts, then a head.

A snapshot that fits is one record under the partition's key (its number), as before. A bigger
one goes out, in the one transaction, as parts under the keys ``<partition>/0`` ..
``<partition>/<n-1>`` (each fits a record), then a head under the partition's key naming the
part count, the size and the SHA-256 of the whole. A reader finds the head as it found a whole
snapshot (the newest value of the partition's key), then each part as the newest value of its key
before the head, and checks the digest: parts of any other snapshot are refused, never mixed in.

Compaction keeps the newest value of every key: the latest head and its parts (written with it,
after every older part of the same key) always stay. Parts of an older, bigger snapshot that the
latest does not name are deleted by the writer (tombstones in the same transaction).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from services.scheduler.core.snapshot import SnapshotRefused

HEAD_MAGIC = b"TOCKSNAP-PARTS\n"  # never a prefix of a whole snapshot's b"TOCKSNAP\n"
PART_MAGIC = b"TOCKSNAP-PART\n"
PART_HEADER_BYTES = 256  # room kept in a part's record for its header line
FORMAT = "tock-snapshot-parts"


@dataclass(frozen=True, slots=True)
class Head:
    """What a head record says of its snapshot."""

    parts: int
    size: int
    digest: str

    def keys(self, partition: int) -> list[str]:
        return [part_key(partition, index) for index in range(self.parts)]


def part_key(partition: int, index: int) -> str:
    return f"{partition}/{index}"


def is_part_key(partition: int, key: str) -> bool:
    prefix = f"{partition}/"
    return key.startswith(prefix) and key[len(prefix):].isdigit()


def split(value: bytes, partition: int, record_bytes: int, part_bytes: int | None = None) -> list[tuple[str, bytes]]:
    """The (key, value) records of a snapshot, in writing order: the value itself under the
    partition's key if it is at most ``record_bytes``, else its parts (records of at most
    ``part_bytes``, default ``record_bytes``), then their head."""
    if len(value) <= record_bytes:
        return [(str(partition), value)]
    step = min(record_bytes, part_bytes or record_bytes) - PART_HEADER_BYTES
    if step <= 0:
        raise ValueError(f"records of {record_bytes} bytes leave no room for a snapshot part")
    digest = hashlib.sha256(value).hexdigest()
    pieces = [value[start:start + step] for start in range(0, len(value), step)]
    records = [(part_key(partition, index), _part(digest, index, len(pieces), piece))
               for index, piece in enumerate(pieces)]
    head = {"format": FORMAT, "parts": len(pieces), "size": len(value), "sha256": digest}
    return [*records, (str(partition), HEAD_MAGIC + json.dumps(head).encode() + b"\n")]


def read_head(value: bytes) -> Head | None:
    """The head a record value is, or None if it is not one (a whole snapshot, or anything the
    snapshot decoder judges). Raises SnapshotRefused for an unreadable head."""
    if not value.startswith(HEAD_MAGIC):
        return None
    try:
        fields = json.loads(value[len(HEAD_MAGIC):])
        head = Head(int(fields["parts"]), int(fields["size"]), str(fields["sha256"]))
    except (ValueError, KeyError, TypeError) as error:
        raise SnapshotRefused(f"unreadable head of a snapshot in parts ({type(error).__name__}: {error})") from None
    if fields.get("format") != FORMAT or head.parts < 1 or head.size < 0:
        raise SnapshotRefused(f"unreadable head of a snapshot in parts: {fields!r}")
    return head


def join(head: Head, partition: int, values: dict[str, bytes | None]) -> bytes:
    """The snapshot a head names, from the newest value of each of its part keys before it.
    Raises SnapshotRefused when a part is missing, of another snapshot, or the whole does not match."""
    pieces = []
    for index, key in enumerate(head.keys(partition)):
        value = values.get(key)
        if value is None:
            raise SnapshotRefused(f"snapshot of partition {partition} in {head.parts} parts: part {index} is missing")
        pieces.append(_payload(value, head, index, partition))
    whole = b"".join(pieces)
    if len(whole) != head.size or hashlib.sha256(whole).hexdigest() != head.digest:
        raise SnapshotRefused(f"snapshot of partition {partition} in {head.parts} parts does not match its head")
    return whole


def _part(digest: str, index: int, parts: int, piece: bytes) -> bytes:
    header = json.dumps({"sha256": digest, "index": index, "parts": parts}).encode()
    return PART_MAGIC + header + b"\n" + piece


def _payload(value: bytes, head: Head, index: int, partition: int) -> bytes:
    end = value.find(b"\n", len(PART_MAGIC))
    try:
        header = json.loads(value[len(PART_MAGIC):end]) if value.startswith(PART_MAGIC) and end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("sha256") != head.digest or header.get("index") != index:
        raise SnapshotRefused(f"snapshot of partition {partition} in {head.parts} parts: part {index} is of "
                              "another snapshot (or unreadable)")
    return value[end + 1:]
