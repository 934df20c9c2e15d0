"""Columnar packing of many flat dataclass records (task instances, runs) for snapshots.

A partition with a long history holds hundreds of thousands of finished task instances; as
JSON they cost seconds to parse. Column by column they are C-speed bytes: floats and ints as
machine arrays, strings joined by NUL and split, None as a mask. Each field's kind comes from
its declared type; a type not listed here stops the import, so a new field is a decision.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from array import array
from collections.abc import Sequence
from typing import Any, TypeAlias

KINDS = {"str": "s", "str | None": "s?", "int": "i", "float": "f", "float | None": "f?", "bool": "b"}
_LENGTH = struct.Struct(">I")
_SEPARATOR = "\x00"
_JOINED, _JSON = b"J", b"L"  # how a string column is written: NUL-joined, or JSON when a value holds NUL

Value: TypeAlias = str | int | float | bool | None  # what a column of one of the KINDS holds
Kinds: TypeAlias = tuple[tuple[str, str], ...]  # (field name, kind) in column order


def field_kinds(cls: type, fields: Sequence[str] | None = None) -> Kinds:
    """(name, kind) of the fields of ``cls`` (default: all), in declaration order."""
    declared = {item.name: str(item.type) for item in dataclasses.fields(cls)}
    names = list(declared) if fields is None else list(fields)
    unknown = {name: declared[name] for name in names if declared[name] not in KINDS}
    if unknown:
        raise TypeError(f"{cls.__name__}: no column kind for fields {unknown}; add one to columns.KINDS")
    return tuple((name, KINDS[declared[name]]) for name in names)


def pack_tuples(rows: Sequence[tuple[Value, ...]], kinds: Kinds) -> list[bytes]:
    """One blob per field of ``rows`` (tuples of the fields' values, in ``kinds`` order)."""
    if not rows:
        return [b"" for _ in kinds]
    return [_pack_column(column, kind) for column, (_name, kind) in zip(zip(*rows, strict=False), kinds, strict=True)]


def unpack_columns(blobs: Sequence[bytes], kinds: Kinds, count: int) -> list[Sequence[Value]]:
    """The columns ``pack_tuples`` wrote, each a list of ``count`` values."""
    columns = [_unpack_column(blob, kind, count) for blob, (_name, kind) in zip(blobs, kinds, strict=True)]
    if any(len(column) != count for column in columns):
        raise ValueError(f"a column does not hold {count} values")
    return columns


def frame(blobs: Sequence[bytes]) -> bytes:
    """Blobs one after the other, each after its length."""
    return b"".join(_LENGTH.pack(len(blob)) + blob for blob in blobs)


def unframe(data: bytes, offset: int = 0) -> list[bytes]:
    blobs = []
    view = memoryview(data)
    while offset < len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        if offset + length > len(data):
            raise ValueError("a blob runs past the end of the snapshot")
        blobs.append(bytes(view[offset:offset + length]))
        offset += length
    return blobs


def _pack_column(column: Sequence[Any], kind: str) -> bytes:
    if kind == "s":
        return _pack_strings(column)
    if kind == "s?":
        return frame([bytes(value is None for value in column),
                      _pack_strings(["" if value is None else value for value in column])])
    if kind == "i":
        return array("q", column).tobytes()
    if kind == "f":
        return array("d", column).tobytes()
    if kind == "f?":
        return frame([bytes(value is None for value in column),
                      array("d", [0.0 if value is None else value for value in column]).tobytes()])
    return bytes(column)  # "b"


def _unpack_column(blob: bytes, kind: str, count: int) -> Sequence[Value]:
    if count == 0:
        return []
    if kind == "s":
        return _unpack_strings(blob, count)
    if kind == "s?":
        mask, strings = unframe(blob)
        return _masked(_unpack_strings(strings, count), mask)
    if kind in ("i", "f"):
        return array("q" if kind == "i" else "d", blob).tolist()
    if kind == "f?":
        mask, floats = unframe(blob)
        return _masked(array("d", floats).tolist(), mask)
    return list(map(bool, blob))  # "b"


def _pack_strings(column: Sequence[str]) -> bytes:
    joined = _SEPARATOR.join(column)
    if joined.count(_SEPARATOR) == len(column) - 1:
        return _JOINED + joined.encode()
    return _JSON + json.dumps(list(column)).encode()


def _unpack_strings(blob: bytes, count: int) -> list[str]:
    if blob[:1] == _JSON:
        strings: list[str] = json.loads(blob[1:])
        return strings
    if blob[:1] != _JOINED and count:
        raise ValueError("unknown string column encoding")
    return blob[1:].decode().split(_SEPARATOR) if count else []


def _masked(values: Sequence[Value], mask: bytes) -> Sequence[Value]:
    nones = mask.count(1)
    if nones == 0:
        return values
    if nones == len(mask):
        return [None] * len(mask)
    return [None if none else value for value, none in zip(values, mask, strict=True)]
