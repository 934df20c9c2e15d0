"""Generate an Avro schema from an event's dataclass declaration, and read frozen ones."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

AVRO_DIR = Path(__file__).parent / "avro"
NAMESPACE = "dev.tock"

_PRIMITIVES = {str: "string", int: "long", float: "double", bool: "boolean", bytes: "bytes"}


def avro_schema(cls: type[DataclassInstance]) -> dict[str, Any]:
    """The Avro record schema of a dataclass (event or nested record)."""
    return _record(cls, seen=set())


def _record(cls: type[DataclassInstance], seen: set[str]) -> dict[str, Any]:
    seen.add(cls.__name__)
    hints = typing.get_type_hints(cls)
    fields = [_field(item, hints[item.name], seen) for item in dataclasses.fields(cls)]
    return {"type": "record", "name": cls.__name__, "namespace": NAMESPACE, "fields": fields}


def _field(item: dataclasses.Field[Any], hint: Any, seen: set[str]) -> dict[str, Any]:
    declared: dict[str, Any] = {"name": item.name, "type": _type(hint, seen)}
    if item.default is not dataclasses.MISSING:
        declared["default"] = item.default
    elif item.default_factory is not dataclasses.MISSING:
        declared["default"] = item.default_factory()
    return declared


def _type(hint: Any, seen: set[str]) -> Any:
    if hint in _PRIMITIVES:
        return _PRIMITIVES[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        others = [arg for arg in args if arg is not type(None)]
        if len(others) != 1 or len(args) != 2:
            raise TypeError(f"only X | None unions are supported, not {hint}")
        return ["null", _type(others[0], seen)]
    if origin is list:
        return {"type": "array", "items": _type(args[0], seen)}
    if origin is dict and args[0] is str:
        return {"type": "map", "values": _type(args[1], seen)}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        # A record named before is referred to by its full name.
        return f"{NAMESPACE}.{hint.__name__}" if hint.__name__ in seen else _record(hint, seen)
    raise TypeError(f"no Avro type for {hint!r}")


def schema_path(name: str, version: int) -> Path:
    return AVRO_DIR / name / f"v{version}.avsc"


@cache
def frozen_schema(name: str, version: int) -> dict[str, Any] | None:
    """The schema frozen for version ``version`` of event ``name``, or None if never written."""
    path = schema_path(name, version)
    if not path.exists():
        return None
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def frozen_versions(name: str) -> list[int]:
    folder = AVRO_DIR / name
    if not folder.is_dir():
        return []
    return sorted(int(path.stem[1:]) for path in folder.glob("v*.avsc"))


def render(schema: dict[str, Any]) -> str:
    """Canonical text of a schema file."""
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"
