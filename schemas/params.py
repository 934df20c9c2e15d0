"""A DAG's params as a try sees them: the DAG's (and its task's) params, then the run's conf over them.

The one rule the SDK (a DAG's own defaults), the API (a trigger's conf, 422), the CLI and the
scheduler (a command that reaches the log invalid is rejected, and each try's params are recorded
in its TaskQueued) apply alike. Values are checked with JSON Schema (the ``jsonschema`` library,
Draft 2020-12 unless a schema names its own ``$schema``, formats checked), as Airflow's Param does;
a ``pattern`` is matched within a time limit (patterns.py).

A definition's ``params_json`` is either

- a JSON array of params, ``[{"name": ..., "schema": {...}, "description": ..., "default": ...}]``
  in their declared order (``default`` absent when the param has none: the trigger must give it), or
- a JSON object of plain values (DagParsed records written before params had schemas): each is a
  param with that default and no schema.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REQUIRED = "required: it has no default and the conf does not give it"


@dataclass(frozen=True)
class ParamSpec:
    """One param of a definition: its JSON Schema, its help text, and its default if it has one."""

    name: str
    schema: dict[str, Any] = field(default_factory=dict)
    description: str | None = None
    has_default: bool = True
    default: Any = None


def specs(params_json: str) -> list[ParamSpec]:
    """The params a definition's ``params_json`` declares, in order (either format, see above)."""
    loaded = json.loads(params_json or "{}")
    if isinstance(loaded, dict):
        return [ParamSpec(str(name), {}, None, True, value) for name, value in loaded.items()]
    items = loaded if isinstance(loaded, list) else []  # (anything else was never written: no params)
    return [ParamSpec(str(item["name"]), _object(item.get("schema")), item.get("description"),
                      "default" in item, item.get("default"))
            for item in items if isinstance(item, dict) and "name" in item]


def _object(schema: Any) -> dict[str, Any]:
    return dict(schema) if isinstance(schema, dict) else {}


def to_json(params: Iterable[ParamSpec]) -> str:
    """``params_json`` for a definition (the array format; raises TypeError/ValueError for a value that is
    not JSON)."""
    items = []
    for spec in params:
        item: dict[str, Any] = {"name": spec.name, "schema": spec.schema, "description": spec.description}
        if spec.has_default:
            item["default"] = spec.default
        items.append(item)
    return json.dumps(items, allow_nan=False)


def schema_problems(schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with a schema itself (empty when it is a valid JSON Schema)."""
    if not isinstance(schema, Mapping):
        return [f"the schema must be a JSON object, not {schema!r}"]
    try:
        text = json.dumps(schema, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as error:
        return [f"the schema must be JSON: {error}"]
    return list(_schema_text_problems(text))


@functools.lru_cache(maxsize=1024)
def _schema_text_problems(text: str) -> tuple[str, ...]:
    """(Checking a schema against its meta-schema costs more than checking a value: done once per schema.)"""
    from jsonschema import exceptions, validators

    schema = json.loads(text)
    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except exceptions.SchemaError as error:
        return (f"invalid schema: {_where(error.absolute_path)}{error.message}",)
    return ()


def value_problems(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Each rule of ``schema`` that ``value`` breaks, as jsonschema words it (empty when it fits)."""
    if not schema:
        return []
    from jsonschema import FormatChecker, validators

    found = schema_problems(schema)
    if found:
        return found
    from schemas.patterns import bounded

    validator = bounded(validators.validator_for(schema, default=validators.Draft202012Validator))(
        schema, format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(value), key=lambda error: (_where(error.absolute_path), error.message))
    return [f"{_where(error.absolute_path)}{error.message}" for error in errors]


def _where(path: Iterable[Any]) -> str:
    steps = "".join(f"[{step!r}]" for step in path)
    return f"at {steps}: " if steps else ""


def spec_problems(spec: ParamSpec, conf: Mapping[str, Any]) -> list[str]:
    """What is wrong with the value a run would give ``spec`` (the conf's, else its default)."""
    if spec.name in conf:
        return value_problems(conf[spec.name], spec.schema)
    if not spec.has_default:
        return [REQUIRED]
    return value_problems(spec.default, spec.schema)


def problems_of(params: Sequence[ParamSpec], conf: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(param name, the rule it breaks) for every param the conf (over the defaults) does not satisfy."""
    return [(spec.name, problem) for spec in params for problem in spec_problems(spec, conf)]


def conf_of(conf_json: str) -> dict[str, Any] | str:
    """The conf as a dict, or why it is not a JSON object."""
    try:
        conf = json.loads(conf_json or "{}")
    except ValueError as error:
        return f"the conf is not JSON: {error}"
    return conf if isinstance(conf, dict) else f"the conf must be a JSON object, not {type(conf).__name__}"


def problems(dag_params_json: str, conf_json: str) -> list[str]:
    """Why a run of the DAG with this conf is refused, each naming the param and the rule
    ("param 'x': 'abc' is not of type 'integer'"); empty when its params all fit."""
    conf = conf_of(conf_json)
    if isinstance(conf, str):
        return [conf]
    return [f"param {name!r}: {problem}" for name, problem in problems_of(specs(dag_params_json), conf)]


def for_task(dag_params_json: str, task_params_json: str, conf_json: str) -> dict[str, Any]:
    """The params' values a try of a task sees: the DAG's, the task's over them, then the conf's keys
    over both (Airflow's dag_run_conf_overrides_params). Plain values, not validated here (the trigger
    was: see :func:`problems`); a param with no default that the conf does not give is None."""
    values = {spec.name: spec.default if spec.has_default else None for spec in specs(dag_params_json)}
    values.update({spec.name: spec.default if spec.has_default else None for spec in specs(task_params_json)})
    conf = conf_of(conf_json)
    if isinstance(conf, dict):
        values.update(conf)
    return values
