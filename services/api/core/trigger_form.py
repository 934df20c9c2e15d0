"""The trigger form, generated from a DAG's params: one input per param (its kind from its JSON Schema
or its default), and the conf its posted inputs make.

A field posts its text under ``param.<name>``; an empty field gives None (as Airflow's form does); a
field whose text cannot be read as its type keeps the text, so the params' rule names what is wrong
with it. Everything shown again after a refusal is the text that was posted, never a re-formatting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.params import ParamSpec, problems_of

PREFIX = "param."
CHECKED = "true"


@dataclass(frozen=True)
class FormField:
    """One input of the form, as the template draws it."""

    name: str  # the param's name
    input_name: str  # the form field's name
    label: str  # the schema's title, else the name
    kind: str  # "checkbox" | "select" | "integer" | "number" | "json" | "date" | "time" | "text"
    text: str  # what the input holds (the posted text, else the default written for it)
    description: str | None = None
    options: list[tuple[str, str]] = field(default_factory=list)  # select: (posted value, shown label)
    examples: list[str] = field(default_factory=list)  # suggestions for a text input
    required: bool = False  # no default: the trigger must give it
    problems: list[str] = field(default_factory=list)


def kind_of(spec: ParamSpec) -> str:
    """The input a param gets: from its schema's enum or type, else from its default's type."""
    schema = spec.schema
    if "enum" in schema:
        return "select"
    types = schema.get("type")
    types = [types] if isinstance(types, str) else [kind for kind in (types or []) if kind != "null"]
    if not types:
        types = [_json_type(spec.default)] if spec.has_default and spec.default is not None else []
    if len(types) != 1:
        return "json" if types else "text"
    if types[0] == "string":
        return {"date": "date", "time": "time"}.get(str(schema.get("format")), "text")
    return {"boolean": "checkbox", "integer": "integer", "number": "number", "object": "json",
            "array": "json"}.get(types[0], "json")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def shown(spec: ParamSpec) -> bool:
    """A param with ``const`` is sent with its default and not shown (Airflow's rule)."""
    return "const" not in spec.schema


def fields(params: Sequence[ParamSpec], posted: Mapping[str, str] | None = None,
           problems: Mapping[str, list[str]] | None = None) -> list[FormField]:
    """The form's inputs, holding ``posted`` texts when the form comes back, else the defaults."""
    return [_field(spec, posted, (problems or {}).get(spec.name, [])) for spec in params if shown(spec)]


def _field(spec: ParamSpec, posted: Mapping[str, str] | None, problems: list[str]) -> FormField:
    kind, input_name = kind_of(spec), PREFIX + spec.name
    if posted is not None:
        text = posted.get(input_name, "")
    else:
        text = _default_text(spec, kind)
    return FormField(name=spec.name, input_name=input_name, label=str(spec.schema.get("title") or spec.name),
                     kind=kind, text=text, description=spec.description or spec.schema.get("description"),
                     options=_options(spec) if kind == "select" else [],
                     examples=[str(example) for example in spec.schema.get("examples") or []
                               if kind == "text"],
                     required=not spec.has_default, problems=problems)


def _default_text(spec: ParamSpec, kind: str) -> str:
    if not spec.has_default or spec.default is None:
        return ""
    if kind == "checkbox":
        return CHECKED if spec.default is True else ""
    if kind == "select" or kind == "json":
        return json.dumps(spec.default, indent=None if kind == "select" else 2)
    return spec.default if isinstance(spec.default, str) else json.dumps(spec.default)


def _options(spec: ParamSpec) -> list[tuple[str, str]]:
    shown_as = spec.schema.get("values_display") or {}
    return [(json.dumps(value), str(shown_as.get(str(value), value))) for value in spec.schema["enum"]]


def value_of(spec: ParamSpec, text: str) -> tuple[Any, str]:
    """The value a posted text gives a param, and why it cannot be read ("" when it can)."""
    kind = kind_of(spec)
    if kind == "checkbox":
        return text == CHECKED, ""
    if text.strip() == "":
        return None, ""
    if kind in ("select", "json"):
        try:
            return json.loads(text), ""
        except ValueError as error:
            return text, f"not JSON: {error}"
    if kind in ("integer", "number"):
        return _number(text.strip(), kind), ""
    return text, ""


def _number(text: str, kind: str) -> Any:
    for read in (int, float) if kind == "number" else (int,):
        try:
            return read(text)
        except ValueError:
            continue
    return text  # the schema's rule says what is wrong with it


def conf_from(params: Sequence[ParamSpec], posted: Mapping[str, str],
              extra_conf: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The conf a posted form makes: each shown param's value, then the raw conf JSON object over
    them; and, by param name, what could not be read (the key "" for the raw conf)."""
    conf: dict[str, Any] = {}
    unreadable: dict[str, list[str]] = {}
    for spec in params:
        if not shown(spec):
            continue
        conf[spec.name], problem = value_of(spec, posted.get(PREFIX + spec.name, ""))
        if problem:
            unreadable[spec.name] = [problem]
    try:
        extra = json.loads(extra_conf or "{}")
    except ValueError as error:
        extra = None
        unreadable[""] = [f"the conf is not JSON: {error}"]
    if isinstance(extra, dict):
        conf.update(extra)
    elif "" not in unreadable:
        unreadable[""] = ["the conf must be a JSON object"]
    return conf, unreadable


def problems_by_param(params: Sequence[ParamSpec], conf: Mapping[str, Any]) -> dict[str, list[str]]:
    """The params' rules the conf breaks, by param name (shown beside each input)."""
    found: dict[str, list[str]] = {}
    for name, problem in problems_of(params, conf):
        found.setdefault(name, []).append(problem)
    return found
