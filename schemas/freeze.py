"""Freeze the current schema of every event, and a sample record of it.

    python -m schemas.freeze          write schemas and samples of new versions
    python -m schemas.freeze --check  fail if a declaration drifted from its frozen schema

A frozen version is never rewritten: changing an event means bumping its VERSION,
so records already in a log keep decoding with the schema they were written with.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import schemas  # noqa: F401  (registers every event)
from schemas.avro import avro_schema, frozen_schema, render, schema_path
from schemas.codec import encode
from schemas.declare import EVENT_TYPES
from schemas.union import EVENT_CLASSES, Event

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Declared = TypeVar("Declared", bound="DataclassInstance")

SAMPLES_DIR = Path(__file__).parent / "samples"


def sample_value(hint: Any, name: str) -> Any:
    """A deterministic, non-default value of a declared type."""
    if hint is str:
        return f"{name}-sample"
    if hint is bool:
        return True
    if hint is int:
        return 7
    if hint is float:
        return 1764470000.25
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list:
        return [sample_value(args[0], name)]
    if typing.get_origin(hint) is dict:
        return {"k": sample_value(args[1], name)}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return sample(hint)
    return sample_value(next(arg for arg in args if arg is not type(None)), name)


def sample(cls: type[Declared]) -> Declared:
    """An instance of an event (or nested record) whose every field holds its sample value."""
    hints = typing.get_type_hints(cls)
    return cls(**{item.name: sample_value(hints[item.name], item.name) for item in dataclasses.fields(cls)})


def sample_path(name: str, version: int) -> Path:
    return SAMPLES_DIR / f"{name}.v{version}.json"


def declarations() -> list[tuple[str, type[Event]]]:
    """(name, class) of every declared event, by name; raises if schemas/union.py lags behind them."""
    if set(EVENT_CLASSES) != set(EVENT_TYPES.values()):
        raise SystemExit("schemas/union.py is out of date: run python -m schemas.generate_union first")
    return [(cls.__name__, cls) for cls in EVENT_CLASSES]


def drifted() -> list[str]:
    """Events whose declaration differs from the schema frozen for their VERSION."""
    problems = []
    for name, cls in declarations():
        frozen = frozen_schema(name, cls.VERSION)
        if frozen is not None and frozen != json.loads(render(avro_schema(cls))):
            problems.append(f"{name}: declaration differs from frozen v{cls.VERSION}; bump its VERSION")
    return problems


def freeze() -> list[str]:
    written = []
    for name, cls in declarations():
        path = schema_path(name, cls.VERSION)
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(avro_schema(cls)))
        example = sample(cls)
        SAMPLES_DIR.mkdir(exist_ok=True)
        payload = {"hex": encode(example).hex(), "fields": dataclasses.asdict(example)}
        sample_path(name, cls.VERSION).write_text(json.dumps(payload, indent=2) + "\n")
        written.append(f"{name} v{cls.VERSION}")
    return written


def main(argv: list[str]) -> int:
    problems = drifted()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    if "--check" not in argv:
        for line in freeze():
            print(f"froze {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
