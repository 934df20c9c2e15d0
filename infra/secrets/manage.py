"""What setting or deleting a variable or connection appends, given the store as it is: nothing when
it would change nothing (setting the same value twice leaves one record), so the CLI and the API
are idempotent. Shared by ``tock variables|connections`` and the API's endpoints."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet

from infra.secrets.store import StoredSecrets, connection_fields, connection_set, variable_set, variable_value
from schemas import ConnectionDeleted, ConnectionSet, VariableDeleted, VariableSet

KEY_PATTERN = r"^[A-Za-z0-9_.\-]{1,250}$"  # a variable key or connection id (Airflow's ids are these)


def set_variable(state: StoredSecrets, fernet: Fernet, key: str, value: str, description: str | None, *,
                 by: str, at: float) -> list[VariableSet]:
    """A VariableSet, unless the store holds this value and description already."""
    stored = state.variables.get(key)
    if stored is not None and stored.description == (description or "") and variable_value(fernet, stored) == value:
        return []
    return [variable_set(fernet, key, value, description, by, at)]


def delete_variable(state: StoredSecrets, key: str, *, by: str, at: float) -> list[VariableDeleted]:
    """A VariableDeleted, if the store holds ``key``."""
    return [VariableDeleted(key=key, deleted_by=by, at=at)] if key in state.variables else []


def set_connection(state: StoredSecrets, fernet: Fernet, conn_id: str, fields: dict[str, Any], *, by: str,
                   at: float) -> list[ConnectionSet]:
    """A ConnectionSet of the JSON form ``fields``, unless the store holds this very connection already."""
    stored = state.connections.get(conn_id)
    wanted = {name: value for name, value in fields.items() if value not in (None, "")}
    if stored is not None and connection_fields(fernet, stored) == wanted:
        return []
    return [connection_set(fernet, conn_id, wanted, by, at)]


def delete_connection(state: StoredSecrets, conn_id: str, *, by: str, at: float) -> list[ConnectionDeleted]:
    return [ConnectionDeleted(conn_id=conn_id, deleted_by=by, at=at)] if conn_id in state.connections else []


def redacted(fields: dict[str, Any]) -> dict[str, Any]:
    """A connection's JSON form with its password as ``***`` (what gets show by default)."""
    return {**fields, "password": "***"} if fields.get("password") is not None else dict(fields)
