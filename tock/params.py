"""``Param`` and ``ParamsDict``, as Airflow's: a param's default and its JSON Schema, checked with
the rule the API, the CLI and the scheduler apply (schemas/params.py)."""

from __future__ import annotations

import copy
import json
from collections.abc import ItemsView, Iterator, Mapping, MutableMapping, ValuesView
from typing import Any

from schemas import params as rules


class ArgNotSet:
    """The type of NOTSET: a param's default when it has none (None is a value)."""

    def __repr__(self) -> str:
        return "NOTSET"

    def __bool__(self) -> bool:
        return False


NOTSET: Any = ArgNotSet()


class ParamValidationError(ValueError):
    """A param's value does not fit its schema, or a param has no value."""


class Param:
    """A param's default and the rules its value must follow.

    ``Param(5, type="integer", minimum=3, description="...")``: the keyword arguments (``type``,
    ``enum``, ``minimum``, ``maximum``, ``minLength``, ``format``, ``items``, ``const``, and the
    trigger form's ``title``, ``examples``, ``values_display``...) are its JSON Schema, or pass
    ``schema={...}`` whole. Without a default, a run must be given the value in its conf.
    """

    def __init__(self, default: Any = NOTSET, description: str | None = None, **schema: Any) -> None:
        if default is not NOTSET:
            _check_json(default)
        self.value = default
        self.description = description
        self.schema: dict[str, Any] = schema.pop("schema") if "schema" in schema else schema

    def resolve(self, value: Any = NOTSET, suppress_exception: bool = False) -> Any:
        """The value (``value``, else the default) once it fits the schema; it becomes the param's value.
        Raises ParamValidationError naming the rule it breaks (with ``suppress_exception``: returns None)."""
        if value is not NOTSET:
            _check_json(value)
        final = self.value if value is NOTSET else value
        problem = "No value passed and Param has no default value" if final is NOTSET else \
            "; ".join(rules.value_problems(final, self.schema))
        if problem:
            if suppress_exception:
                return None
            raise ParamValidationError(problem)
        self.value = final
        return final

    @property
    def has_value(self) -> bool:
        return self.value is not NOTSET and self.value is not None

    def dump(self) -> dict[str, Any]:
        return {"value": None if self.value is NOTSET else self.value, "description": self.description,
                "schema": self.schema}

    def serialize(self) -> dict[str, Any]:
        return {"value": self.value, "description": self.description, "schema": self.schema}

    def __copy__(self) -> Param:
        return Param(self.value, self.description, schema=self.schema)

    def __repr__(self) -> str:
        return f"Param({self.value!r}, description={self.description!r}, schema={self.schema!r})"


def _check_json(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise ParamValidationError(f"All provided parameters must be json-serializable. The value {value!r} "
                                   "is not serializable.") from None


class ParamsDict(MutableMapping[str, Any]):
    """A DAG's or a task's params: every value is kept as a Param; reading a key resolves it.

    Setting a key that holds a Param checks the new value against its schema.
    """

    def __init__(self, dict_obj: Mapping[str, Any] | None = None, suppress_exception: bool = False) -> None:
        self._params: dict[str, Param] = {key: value if isinstance(value, Param) else Param(value)
                                          for key, value in (dict_obj or {}).items()}
        self.suppress_exception = suppress_exception

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, Param):
            self._params[key] = value
        elif key in self._params:
            try:
                self._params[key].resolve(value=value, suppress_exception=self.suppress_exception)
            except ParamValidationError as error:
                raise ParamValidationError(f"Invalid input for param {key}: {error}") from None
        else:
            self._params[key] = Param(value)

    def __getitem__(self, key: str) -> Any:
        return self._params[key].resolve(suppress_exception=self.suppress_exception)

    def __delitem__(self, key: str) -> None:
        del self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, key: object) -> bool:
        return key in self._params

    def __bool__(self) -> bool:
        return bool(self._params)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ParamsDict):
            return self.dump() == other.dump()
        if isinstance(other, dict):
            return self.dump() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like dict

    def __copy__(self) -> ParamsDict:
        return ParamsDict(self._params, self.suppress_exception)

    def __deepcopy__(self, memo: dict[int, Any]) -> ParamsDict:
        return ParamsDict(copy.deepcopy(self._params, memo), self.suppress_exception)

    def __repr__(self) -> str:
        return repr(self.dump())

    def get_param(self, key: str) -> Param:
        """The Param kept under ``key`` (not its value)."""
        return self._params[key]

    def items(self) -> ItemsView[str, Param]:  # Airflow's: the Params themselves, not their values
        return ItemsView(self._params)

    def values(self) -> ValuesView[Param]:  # Airflow's: the Params themselves, not their values
        return ValuesView(self._params)

    def update(self, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and not kwargs and isinstance(args[0], ParamsDict):
            for key, param in args[0].items():
                self[key] = param
            return
        super().update(*args, **kwargs)

    def dump(self) -> dict[str, Any]:
        """Each param's value, None where it does not resolve."""
        return {key: param.resolve(suppress_exception=True) for key, param in self._params.items()}

    def validate(self) -> dict[str, Any]:
        """Every param's value; raises ParamValidationError naming the first param that does not resolve."""
        resolved = {}
        for key, param in self._params.items():
            try:
                resolved[key] = param.resolve(suppress_exception=self.suppress_exception)
            except ParamValidationError as error:
                raise ParamValidationError(f"Invalid input for param {key}: {error}") from None
        return resolved

    def serialize(self) -> dict[str, Any]:
        return self.dump()


def params_of(params: Mapping[str, Any] | None, what: str) -> ParamsDict:
    """``params=`` of a DAG or task as a ParamsDict; raises ValueError naming what is wrong."""
    if params is None:
        return ParamsDict()
    if not isinstance(params, Mapping) or not all(isinstance(key, str) for key in params):
        raise ValueError(f"{what} must be a dict of names to values or Params, got {params!r}")
    try:
        return params if isinstance(params, ParamsDict) else ParamsDict(params)
    except ParamValidationError as error:
        raise ValueError(f"{what}: {error}") from None


def definition_problems(params: ParamsDict, *, scheduled: bool) -> list[str]:
    """What makes params unusable in a definition, each naming the param and the rule: a schema that is
    not JSON Schema, and (for a DAG with a schedule, whose scheduled runs have only the defaults, as
    Airflow checks) a param without a default or whose default breaks its schema."""
    found = []
    for name, spec in _specs(params):
        broken = rules.schema_problems(spec.schema)
        if spec.description is not None and not isinstance(spec.description, str):
            broken.append(f"description must be a string, not {spec.description!r}")
        if not broken and scheduled and not spec.has_default:
            broken = ["it has no default, which a DAG with a schedule needs (its scheduled runs have no conf)"]
        elif not broken and scheduled:
            broken = [f"its default breaks its schema: {problem}"
                      for problem in rules.value_problems(spec.default, spec.schema)]
        found += [f"param {name!r}: {problem}" for problem in broken]
    return found


def to_params_json(params: ParamsDict) -> str:
    """The definition's ``params_json`` (schemas/params.py, the array format)."""
    return rules.to_json(spec for _name, spec in _specs(params))


def _specs(params: ParamsDict) -> list[tuple[str, rules.ParamSpec]]:
    return [(name, rules.ParamSpec(name, param.schema, param.description, param.value is not NOTSET,
                                   None if param.value is NOTSET else param.value))
            for name, param in params.items()]
