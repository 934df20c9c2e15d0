"""Avro binary records with a small header naming the event type and its schema version.

Layout of a record value::

    0x54 ('T') | name length (1 byte) | event type name (ASCII) | version (2 bytes, big endian) | Avro body

The body is written with the event's current schema. A record written with any
frozen version decodes to the current declaration by Avro schema resolution.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from schemas.avro import avro_schema, frozen_schema
from schemas.declare import EVENT_TYPES
from schemas.fastread import CorruptBody, Reader, compile_reader

MAGIC = 0x54
_VERSION = struct.Struct(">H")


class DecodeError(ValueError):
    """A record is not a Tock event this code can read; ``reason`` says why."""


class UnknownEventType(DecodeError):
    pass


class UnknownSchemaVersion(DecodeError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class _Encoder:
    header: bytes
    schema: Any
    to_record: Callable[[Any], dict]


@dataclasses.dataclass(frozen=True, slots=True)
class _Decoder:
    cls: type
    writer: Any
    reader: Any | None  # None when the writer schema is the current one
    from_record: Callable[[dict], Any]
    fast: Reader | None  # generated reader, for records written with the current schema


def encode(event: Any) -> bytes:
    """The record value of an event."""
    encoder = _encoder(type(event))
    buffer = io.BytesIO()
    buffer.write(encoder.header)
    schemaless_writer(buffer, encoder.schema, encoder.to_record(event))
    return buffer.getvalue()


def decode(value: bytes | None) -> Any:
    """The event in a record value, as the current declaration. Raises DecodeError."""
    if not value or len(value) < 4 or value[0] != MAGIC:
        raise DecodeError("not a Tock event record (bad or missing header)")
    body_start = value[1] + 4
    header = value[:body_start]
    decoder = _DECODERS.get(header) or _decoder_for_header(header, len(value))
    try:
        if decoder.fast is not None:
            event, end = decoder.fast(value, body_start)
            if end != len(value):
                raise CorruptBody(f"body ends at byte {end} of {len(value)}")
            return event
        buffer = io.BytesIO(value)
        buffer.seek(body_start)
        return decoder.from_record(schemaless_reader(buffer, decoder.writer, decoder.reader))
    except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError, struct.error) as error:
        raise DecodeError(f"corrupt {decoder.cls.__name__} body: {error}") from None


# Decoders by raw header bytes: the common path skips parsing the header at all.
_DECODERS: dict[bytes, _Decoder] = {}


def _decoder_for_header(header: bytes, length: int) -> _Decoder:
    name = header[2:-2].decode("ascii", errors="replace")
    if len(header) != header[1] + 4 or length < len(header):
        raise DecodeError(f"truncated header of {name!r}")
    (version,) = _VERSION.unpack_from(header, len(header) - 2)
    decoder = _decoder(name, version)
    _DECODERS[header] = decoder
    return decoder


def peek_type(value: bytes | None) -> str | None:
    """The event type named in a record's header, without decoding the body."""
    if not value or len(value) < 2 or value[0] != MAGIC:
        return None
    return value[2 : 2 + value[1]].decode("ascii", errors="replace")


@cache
def _encoder(cls: type) -> _Encoder:
    name = cls.__name__.encode("ascii")
    header = bytes([MAGIC, len(name)]) + name + _VERSION.pack(cls.VERSION)
    return _Encoder(header, parse_schema(avro_schema(cls)), _to_record_fn(cls))


@cache
def _decoder(name: str, version: int) -> _Decoder:
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise UnknownEventType(f"unknown event type {name!r} (written by a newer Tock?)")
    written = frozen_schema(name, version)
    if written is None:
        raise UnknownSchemaVersion(f"{name} has no frozen schema v{version} (known up to v{cls.VERSION})")
    writer = parse_schema(written)
    current = version == cls.VERSION
    reader = None if current else parse_schema(avro_schema(cls))
    return _Decoder(cls, writer, reader, _from_record_fn(cls), compile_reader(cls) if current else None)


def _to_record_fn(cls: type) -> Callable[[Any], dict]:
    converters = _nested_converters(cls, _to_record_fn)
    names = tuple(item.name for item in dataclasses.fields(cls))
    if not converters:
        return lambda obj: {name: getattr(obj, name) for name in names}

    def to_record(obj: Any) -> dict:
        record = {name: getattr(obj, name) for name in names}
        for name, convert in converters.items():
            record[name] = convert(record[name])
        return record

    return to_record


def _from_record_fn(cls: type) -> Callable[[dict], Any]:
    converters = _nested_converters(cls, _from_record_fn)
    build = _builder(cls)
    if not converters:
        return build

    def from_record(record: dict) -> Any:
        for name, convert in converters.items():
            record[name] = convert(record[name])
        return build(record)

    return from_record


def _builder(cls: type) -> Callable[[dict], Any]:
    """Build a frozen, slotted event from a complete record without its ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
    which doubles the cost of decoding; a decoded record is complete and already typed
    by its schema, so the slots are filled directly.
    """
    setters = tuple((item.name, getattr(cls, item.name).__set__) for item in dataclasses.fields(cls))
    new = object.__new__

    def build(record: dict) -> Any:
        event = new(cls)
        for name, set_slot in setters:
            set_slot(event, record[name])
        return event

    return build


def _nested_converters(cls: type, make: Callable) -> dict[str, Callable[[Any], Any]]:
    """Per-field converters for fields holding nested records (or lists of them)."""
    converters = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name.isupper():  # TOPIC / VERSION class variables
            continue
        args = typing.get_args(hint)
        if dataclasses.is_dataclass(hint):
            converters[name] = _optional(make(hint))
        elif typing.get_origin(hint) is list and args and dataclasses.is_dataclass(args[0]):
            converters[name] = _each(make(args[0]))
        elif any(dataclasses.is_dataclass(arg) for arg in args):
            raise TypeError(f"{cls.__name__}.{name}: nested records only directly or in a list")
    return converters


def _optional(convert: Callable) -> Callable:
    return lambda value: None if value is None else convert(value)


def _each(convert: Callable) -> Callable:
    return lambda values: [convert(value) for value in values]
