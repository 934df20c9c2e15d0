"""Variables: named values a task reads at run time, as Airflow's ``airflow.sdk.Variable``.

``Variable.get`` looks the key up through the installed secrets chain (tock/secrets: environment
``TOCK_VAR_<KEY>``, the secrets file, Kubernetes Secrets, Tock's store), first hit wins; a value
whose key holds a sensitive word (password, secret, api_key, ...) is masked in the try's log from
then on. ``Variable.set`` and ``Variable.delete`` write to Tock's store (tock.secrets, encrypted).
"""

from __future__ import annotations

import json
from typing import Any

from tock.secrets import current_chain
from tock.secrets.errors import VariableNotFound


class _NotSet:
    def __repr__(self) -> str:
        return "NOTSET"


NOTSET: Any = _NotSet()


class Variable:
    """A variable: ``Variable.get("key")``, ``Variable.set("key", value)``, ``Variable.delete("key")``."""

    def __init__(self, key: str, value: Any = None, description: str | None = None) -> None:
        self.key, self.value, self.description = key, value, description

    def __repr__(self) -> str:  # never the value: it may be a secret
        return f"Variable(key={self.key!r})"

    @classmethod
    def get(cls, key: str, default: Any = NOTSET, deserialize_json: bool = False) -> Any:
        """The value of ``key`` (parsed as JSON with ``deserialize_json``); ``default`` when no backend
        has it, or AirflowRuntimeError (a KeyError) when no default is given."""
        value = current_chain().variable(key)
        if value is None:
            if default is NOTSET:
                raise VariableNotFound(f"Variable {key} not found")
            return default
        return json.loads(value) if deserialize_json else value

    @classmethod
    def set(cls, key: str, value: Any, description: str | None = None, serialize_json: bool = False) -> None:
        """Set ``key`` in Tock's store (as JSON with ``serialize_json``; else its text)."""
        text = json.dumps(value, indent=2) if serialize_json else str(value)
        current_chain().writable().set_variable(key, text, description)

    @classmethod
    def delete(cls, key: str) -> None:
        """Delete ``key`` from Tock's store (nothing happens when it is not there)."""
        current_chain().writable().delete_variable(key)
