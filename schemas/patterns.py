"""JSON Schema's ``pattern`` and ``patternProperties`` matched with a time limit (the ``regex`` module's).

A param's ``pattern`` is the DAG author's; the value it is matched against is whoever triggers the run. A
pattern that backtracks (``^(a|aa)+$`` against forty ``a`` and a ``!``) takes minutes with Python's ``re``,
and the check runs in the API's request and in the scheduler's decision turn: one trigger could stall
either. Here a match taking over PATTERN_SECONDS refuses the value, saying so; the refusal is an event
like any other (CommandRejected), so a replay reads it and does not match again.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import regex
from jsonschema import ValidationError, validators
from jsonschema.protocols import Validator

PATTERN_SECONDS = 1.0


@functools.lru_cache(maxsize=16)
def bounded(cls: type[Validator]) -> type[Validator]:
    """``cls`` with its pattern keywords matched within PATTERN_SECONDS."""
    extended: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]  # (jsonschema's stubs)
        cls, {"pattern": _pattern, "patternProperties": _pattern_properties})
    return extended


def _search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; None when it took over PATTERN_SECONDS."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        return None


def _too_slow(pattern: str, text: str) -> ValidationError:
    return ValidationError(f"matching {pattern!r} against {text[:40]!r}{'...' if len(text) > 40 else ''} took over "
                           f"{PATTERN_SECONDS:g} s: refused (the pattern backtracks on this value)")


def _pattern(validator: Validator, pattern: str, instance: Any, _schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string"):
        found = _search(pattern, instance)
        if found is None:
            yield _too_slow(pattern, instance)
        elif not found:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Validator, properties: Mapping[str, Any], instance: Any,
                        _schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        for key, value in instance.items():
            found = _search(pattern, key)
            if found is None:
                yield _too_slow(pattern, key)
            elif found:
                yield from validator.descend(  # type: ignore[attr-defined]  # (every validator class has it)
                    value, subschema, path=key, schema_path=pattern)
