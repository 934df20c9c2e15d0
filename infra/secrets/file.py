"""Variables and connections from a local file (``TOCK_SECRETS_FILE``), JSON or YAML::

    variables:
      region: eu-west-1
    connections:
      warehouse: postgres://etl:pw@db:5432/dw        # a URI
      api: {conn_type: http, host: example.com, password: pw, extra: {timeout: 5}}

Read once, when the backend is built (a change is seen by processes started after it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


class SecretsFileError(ValueError):
    """The secrets file cannot be read or is not of the documented shape."""


class FileSecrets:
    name = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        content = _load(path)
        self._variables = _section(content, "variables", path)
        self._connections = _section(content, "connections", path)

    def get_variable(self, key: str) -> str | None:
        value = self._variables.get(key)
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value)  # a structured value reads as JSON (Variable.get(..., deserialize_json=True))

    def get_connection(self, conn_id: str) -> str | None:
        value = self._connections.get(conn_id)
        if value is None:
            return None
        return json.dumps(value) if isinstance(value, dict) else str(value)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        content = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise SecretsFileError(f"cannot read the secrets file {path} (TOCK_SECRETS_FILE): {error}") from None
    if content is None:
        return {}
    if not isinstance(content, dict) or set(content) - {"variables", "connections"}:
        raise SecretsFileError(f"the secrets file {path} must be a mapping of 'variables' and 'connections'")
    return content


def _section(content: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    section = content.get(name) or {}
    if not isinstance(section, dict):
        raise SecretsFileError(f"'{name}' of the secrets file {path} must be a mapping")
    return {str(key): value for key, value in section.items()}
