"""A decoder generated per event class for bodies written with its current schema.

Replays decode millions of records, and a general Avro reader pays for its
generality on each one (a call through the library, a dict per record, then the
event built from the dict). This module generates, once per class, straight-line
Python that reads the Avro binary encoding of exactly that class's schema into the
event's slots. It covers the types ``schemas.avro`` maps declarations to: string,
long, double, boolean, bytes, ``X | None``, lists, string-keyed dicts and nested
records. Records written with an older version still go through fastavro's schema
resolution (``schemas.codec``); a test checks this decoder against fastavro on
every event type.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Reader = Callable[[bytes, int], tuple[Any, int]]  # (buffer, position) -> (value, next position)
Declared = TypeVar("Declared", bound="DataclassInstance")  # an event or a record nested in one

_DOUBLE = struct.Struct("<d").unpack_from


class CorruptBody(ValueError):
    """The bytes do not follow the schema (bad union index, negative length, ...)."""


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag-encoded Avro long, and the position after it."""
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBody("varint longer than 10 bytes")


# -- code templates: each reads one value into `v` from `buf` at `pos` -------------
_LONG = """\
b = buf[pos]
if b < 0x80:
    v = (b >> 1) ^ -(b & 1); pos += 1
else:
    v, pos = varint(buf, pos)"""
_LENGTH = _LONG + "\nif v < 0: raise CorruptBody('negative length')"
_TEMPLATES = {
    str: _LENGTH + "\nn = v; v = buf[pos:pos + n].decode(); pos += n",
    bytes: _LENGTH + "\nn = v; v = bytes(buf[pos:pos + n]); pos += n",
    int: _LONG,
    float: "v = DOUBLE(buf, pos)[0]; pos += 8",
    bool: "v = buf[pos] != 0; pos += 1",
}


def slot(cls: type[object], name: str) -> types.MemberDescriptorType:
    """The slot of field ``name`` of a slotted dataclass (its ``__get__``/``__set__`` read and fill it)."""
    for owner in cls.__mro__:
        member = vars(owner).get(name)
        if isinstance(member, types.MemberDescriptorType):
            return member
    raise TypeError(f"{cls.__name__}.{name} is not a slot (declare events with @event, records with @record)")


def compile_reader(cls: type[Declared]) -> Callable[[bytes, int], tuple[Declared, int]]:
    """A reader of ``cls``'s current Avro encoding that returns the event and the end position."""
    namespace: dict[str, Any] = {"varint": varint, "DOUBLE": _DOUBLE, "CorruptBody": CorruptBody,
                                 "read_blocks": read_blocks, "new": object.__new__, "cls": cls}
    hints = typing.get_type_hints(cls)
    lines = ["def read(buf, pos):", "    event = new(cls)"]
    for index, item in enumerate(dataclasses.fields(cls)):
        lines += _indent(_value_code(hints[item.name], namespace, f"f{index}"), 1)
        namespace[f"set{index}"] = slot(cls, item.name).__set__
        lines.append(f"    set{index}(event, v)")
    lines.append("    return event, pos")
    exec(compile("\n".join(lines), f"<reader of {cls.__name__}>", "exec"), namespace)  # noqa: S102
    read: Callable[[bytes, int], tuple[Declared, int]] = namespace["read"]  # the code above, built for cls
    return read


def _value_code(hint: Any, namespace: dict[str, Any], tag: str) -> list[str]:
    """Lines that leave the decoded value of ``hint`` in ``v``."""
    if hint in _TEMPLATES:
        return _TEMPLATES[hint].splitlines()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = next(arg for arg in args if arg is not type(None))
        return ["b = buf[pos]; pos += 1", "if b == 0:", "    v = None", "elif b == 2:",
                *_indent(_value_code(inner, namespace, tag), 1),
                "else:", "    raise CorruptBody(f'union index {(b >> 1) ^ -(b & 1)}')"]
    if origin is list:
        namespace[f"item_{tag}"] = _item_reader(args[0], namespace, tag)
        return [f"v, pos = read_blocks(buf, pos, item_{tag}, None)"]
    if origin is dict:
        namespace[f"item_{tag}"] = _item_reader(args[1], namespace, tag)
        namespace[f"key_{tag}"] = _item_reader(str, namespace, tag + "k")
        return [f"v, pos = read_blocks(buf, pos, item_{tag}, key_{tag})"]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        namespace[f"record_{tag}"] = compile_reader(hint)
        return [f"v, pos = record_{tag}(buf, pos)"]
    raise TypeError(f"no Avro reader for {hint!r}")


def _item_reader(hint: Any, namespace: dict[str, Any], tag: str) -> Reader:
    """A standalone reader of one value of ``hint`` (items of arrays and maps)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return compile_reader(hint)
    scope = {key: value for key, value in namespace.items() if not key.startswith(("set", "cls", "new"))}
    lines = ["def read_item(buf, pos):", *_indent(_value_code(hint, scope, tag + "i"), 1), "    return v, pos"]
    exec(compile("\n".join(lines), f"<reader of {hint!r}>", "exec"), scope)  # noqa: S102
    read_item: Reader = scope["read_item"]
    return read_item


def read_blocks(buf: bytes, pos: int, read_item: Reader, read_key: Reader | None) -> tuple[Any, int]:
    """An Avro array (``read_key`` None) or map: blocks of items until an empty block."""
    items: Any = [] if read_key is None else {}
    while True:
        count, pos = varint(buf, pos)
        if count == 0:
            return items, pos
        if count < 0:  # a negative count is followed by the block's size in bytes
            count = -count
            _size, pos = varint(buf, pos)
        for _ in range(count):
            if read_key is None:
                value, pos = read_item(buf, pos)
                items.append(value)
            else:
                key, pos = read_key(buf, pos)
                items[key], pos = read_item(buf, pos)


def _indent(lines: list[str], levels: int) -> list[str]:
    return ["    " * levels + line for line in lines]
