"""Avro binary records, in two frames.

The self-describing frame names the event type and its schema version::

    0x54 ('T') | name length (1 byte) | event type name (ASCII) | version (2 bytes, big endian) | Avro body

It is what Tock keeps inside its own files and records (snapshots, spool files, parse reports), and
what it wrote to its topics before it spoke the Schema Registry wire format (``schemas/wire.py``),
which :func:`encode_record` writes when a registry is configured. :func:`decode` reads both, so a
topic with records of both kinds reads as one history (the migration is one-way: nothing rewrites
old records). The body is written with the event's current schema; a record written with any frozen
version decodes to the current declaration by Avro schema resolution.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.types import Schema

from schemas.avro import avro_schema, frozen_schema
from schemas.fastread import CorruptBody, compile_reader, slot, varint
from schemas.union import EVENT_CLASSES, Event
from schemas.wire import IDS, WIRE_MAGIC, UnknownSchemaId

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

MAGIC = 0x54
_VERSION = struct.Struct(">H")

Declared = TypeVar("Declared", bound="DataclassInstance")  # an event or a record nested in one
AvroRecord = dict[str, Any]  # a record as fastavro reads and writes it: field name -> value
Convert = Callable[[Any], Any]  # a field value to or from its Avro form

_CLASSES: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_CLASSES}


class DecodeError(ValueError):
    """A record is not a Tock event this code can read; ``reason`` says why."""


class UnknownEventType(DecodeError):
    pass


class UnknownSchemaVersion(DecodeError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class _Encoder:
    header: bytes
    schema: Schema
    to_record: Callable[[Event], AvroRecord]


@dataclasses.dataclass(frozen=True, slots=True)
class _Decoder:
    cls: type[Event]
    writer: Schema
    reader: Schema | None  # None when the writer schema is the current one
    from_record: Callable[[AvroRecord], Event]
    fast: Callable[[bytes, int], tuple[Event, int]] | None  # generated reader, for the current schema


def event_type(name: str) -> type[Event]:
    """The current declaration of the event called ``name``."""
    try:
        return _CLASSES[name]
    except KeyError:
        raise KeyError(f"unknown event type {name!r}") from None


def encode(event: Event) -> bytes:
    """The record value of an event."""
    encoder = _encoder(type(event))
    buffer = io.BytesIO()
    buffer.write(encoder.header)
    schemaless_writer(buffer, encoder.schema, encoder.to_record(event))
    return buffer.getvalue()


def encode_record(event: Event, topic: str, *, wire: bool) -> bytes:
    """The value of ``event`` as a record of ``topic`` (its real name): with ``wire`` (the writer's
    settings name a schema registry) the Schema Registry wire format, through the registry attached
    to ``schemas.wire.IDS``; else the self-describing frame."""
    if not wire:
        return encode(event)
    cls = type(event)
    prefix = _WIRE_PREFIXES.get((topic, cls))
    if prefix is None:
        schema_id, union = IDS.writer(topic, cls.TOPIC)
        prefix = _WIRE_PREFIXES[(topic, cls)] = (bytes([WIRE_MAGIC]) + _ID.pack(schema_id)
                                                 + _zigzag(union.index(cls.__name__)))
    encoder = _encoder(cls)
    buffer = io.BytesIO()
    buffer.write(prefix)
    schemaless_writer(buffer, encoder.schema, encoder.to_record(event))
    return buffer.getvalue()


def decode(value: bytes | None) -> Event:
    """The event in a record value (either frame), as the current declaration. Raises DecodeError."""
    if not value or len(value) < 4:
        raise DecodeError("not a Tock event record (bad or missing header)")
    if value[0] == WIRE_MAGIC:
        known = _WIRE_DECODERS.get(value[:6])  # magic, id and a one-byte branch index
        if known is not None and value[5] < 0x80:
            decoder, body_start = known, 6
        else:
            decoder, body_start = _wire_decoder(value)
    elif value[0] == MAGIC:
        body_start = value[1] + 4
        header = value[:body_start]
        decoder = _DECODERS.get(header) or _decoder_for_header(header, len(value))
    else:
        raise DecodeError("not a Tock event record (bad or missing header)")
    try:
        if decoder.fast is not None:
            event, end = decoder.fast(value, body_start)
            if end != len(value):
                raise CorruptBody(f"body ends at byte {end} of {len(value)}")
            return event
        buffer = io.BytesIO(value)
        buffer.seek(body_start)
        return decoder.from_record(_avro_record(schemaless_reader(buffer, decoder.writer, decoder.reader)))
    except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError, struct.error) as error:
        raise DecodeError(f"corrupt {decoder.cls.__name__} body: {error}") from None


def _avro_record(value: object) -> AvroRecord:
    if not isinstance(value, dict):  # an event's schema is a record: fastavro reads it as a dict
        raise TypeError(f"expected a record, read {type(value).__name__}")
    return value


# Decoders by raw header bytes (a wire header is its magic, id and one-byte branch index): the
# common path skips parsing the header at all.
_DECODERS: dict[bytes, _Decoder] = {}
_WIRE_DECODERS: dict[bytes, _Decoder] = {}
_ENCODERS: dict[type[Event], _Encoder] = {}
_WIRE_PREFIXES: dict[tuple[str, type[Event]], bytes] = {}  # (topic, event type) -> magic, id, branch
_ID = struct.Struct(">I")


def _zigzag(number: int) -> bytes:
    """An Avro long (zigzag varint)."""
    value = (number << 1) ^ (number >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _wire_branch(value: bytes) -> tuple[tuple[str, int], int]:
    """The (event, version) of a wire-format record and where its record body starts."""
    if len(value) < 6:
        raise DecodeError("truncated Schema Registry frame")
    (schema_id,) = _ID.unpack_from(value, 1)
    try:
        branches = IDS.branches(schema_id)
        index, body_start = varint(value, 5)
    except UnknownSchemaId as error:
        raise DecodeError(str(error)) from None
    except IndexError:
        raise DecodeError("truncated Schema Registry frame") from None
    if not 0 <= index < len(branches):
        raise DecodeError(f"branch {index} of schema id {schema_id}, which has {len(branches)}")
    return branches[index], body_start


def _wire_decoder(value: bytes) -> tuple[_Decoder, int]:
    (name, version), body_start = _wire_branch(value)
    decoder = _decoder(name, version)
    if body_start == 6:
        _WIRE_DECODERS[value[:6]] = decoder
    return decoder, body_start


def _decoder_for_header(header: bytes, length: int) -> _Decoder:
    name = header[2:-2].decode("ascii", errors="replace")
    if len(header) != header[1] + 4 or length < len(header):
        raise DecodeError(f"truncated header of {name!r}")
    (version,) = _VERSION.unpack_from(header, len(header) - 2)
    decoder = _decoder(name, version)
    _DECODERS[header] = decoder
    return decoder


def peek_type(value: bytes | None) -> str | None:
    """The event type named in a record's header (or its schema id's branch), without decoding the body."""
    if value and value[0] == WIRE_MAGIC:
        try:
            return _wire_branch(value)[0][0]
        except DecodeError:
            return None
    if not value or len(value) < 2 or value[0] != MAGIC:
        return None
    return value[2 : 2 + value[1]].decode("ascii", errors="replace")


def _encoder(cls: type[Event]) -> _Encoder:
    encoder = _ENCODERS.get(cls)
    if encoder is None:
        name = cls.__name__.encode("ascii")
        header = bytes([MAGIC, len(name)]) + name + _VERSION.pack(cls.VERSION)
        encoder = _ENCODERS[cls] = _Encoder(header, parse_schema(avro_schema(cls)), _to_record_fn(cls))
    return encoder


@cache
def _decoder(name: str, version: int) -> _Decoder:
    cls = _CLASSES.get(name)
    if cls is None:
        raise UnknownEventType(f"unknown event type {name!r} (written by a newer Tock?)")
    written = frozen_schema(name, version)
    if written is None:
        raise UnknownSchemaVersion(f"{name} has no frozen schema v{version} (known up to v{cls.VERSION})")
    writer = parse_schema(written)
    current = version == cls.VERSION
    reader = None if current else parse_schema(avro_schema(cls))
    fast = compile_reader(cls) if current else None
    return _Decoder(cls, writer, reader, _from_record_fn(cls), fast)


def _to_record_fn(cls: type[Declared]) -> Callable[[Declared], AvroRecord]:
    converters = _nested_converters(cls, _to_record_fn)
    getters = tuple((item.name, slot(cls, item.name).__get__) for item in dataclasses.fields(cls))
    if not converters:
        return lambda obj: {name: get(obj) for name, get in getters}

    def to_record(obj: Declared) -> AvroRecord:
        record = {name: get(obj) for name, get in getters}
        for name, convert in converters.items():
            record[name] = convert(record[name])
        return record

    return to_record


def _from_record_fn(cls: type[Declared]) -> Callable[[AvroRecord], Declared]:
    converters = _nested_converters(cls, _from_record_fn)
    build = _builder(cls)
    if not converters:
        return build

    def from_record(record: AvroRecord) -> Declared:
        for name, convert in converters.items():
            record[name] = convert(record[name])
        return build(record)

    return from_record


def _builder(cls: type[Declared]) -> Callable[[AvroRecord], Declared]:
    """Build a frozen, slotted event from a complete record without its ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
    which doubles the cost of decoding; a decoded record is complete and already typed
    by its schema, so the slots are filled directly.
    """
    setters = tuple((item.name, slot(cls, item.name).__set__) for item in dataclasses.fields(cls))
    new = object.__new__

    def build(record: AvroRecord) -> Declared:
        event = new(cls)
        for name, set_slot in setters:
            set_slot(event, record[name])
        return event

    return build


def _nested_converters(cls: type[DataclassInstance],
                       make: Callable[[type[DataclassInstance]], Convert]) -> dict[str, Convert]:
    """Per-field converters for fields holding nested records (optional ones, or lists of them)."""
    converters: dict[str, Convert] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name.isupper():  # TOPIC / VERSION / ROUTE class variables
            continue
        args = typing.get_args(hint)
        if _is_record(hint):
            converters[name] = _optional(make(hint))
        elif typing.get_origin(hint) is list and args and _is_record(args[0]):
            converters[name] = _each(make(args[0]))
        elif _is_record(record := _optional_of(args)):
            converters[name] = _optional(make(record))  # an optional nested record (X | None)
        elif any(dataclasses.is_dataclass(arg) for arg in args):
            raise TypeError(f"{cls.__name__}.{name}: nested records only directly or in a list")
    return converters


def _optional_of(args: tuple[object, ...]) -> object:
    """X of an ``X | None`` union's arguments (None otherwise)."""
    others = [arg for arg in args if arg is not type(None)]
    return others[0] if len(args) == 2 and len(others) == 1 else None


def _is_record(hint: object) -> TypeGuard[type[DataclassInstance]]:
    """Whether a field's declared type is a nested record (a dataclass)."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _optional(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _each(convert: Convert) -> Convert:
    return lambda values: [convert(value) for value in values]
