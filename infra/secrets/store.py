"""Tock's own store of variables and connections: the compacted topic tock.secrets, values encrypted.

``fold_store(events)`` is the store as the log says (pure); :class:`TockStore` reads the topic to its
end once per process (then serves from that), appends VariableSet / ConnectionSet and their
deletions, and is the writable backend of the chain (``Variable.set`` from task code).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.fernet import Fernet

from infra.secrets.keys import decrypt, encrypt, fernet_of
from infra.settings import Settings
from schemas import SECRETS, ConnectionDeleted, ConnectionSet, SecretsTopicEvent, VariableDeleted, VariableSet

CLEAR_FIELDS = ("conn_type", "description")  # what a ConnectionSet holds in clear (lists show them)


@dataclass
class StoredSecrets:
    """The latest record of each variable and connection still set."""

    variables: dict[str, VariableSet] = field(default_factory=dict)
    connections: dict[str, ConnectionSet] = field(default_factory=dict)


def evolve_store(state: StoredSecrets, event: SecretsTopicEvent) -> StoredSecrets:
    match event:
        case VariableSet():
            state.variables[event.key] = event
        case VariableDeleted():
            state.variables.pop(event.key, None)
        case ConnectionSet():
            state.connections[event.conn_id] = event
        case ConnectionDeleted():
            state.connections.pop(event.conn_id, None)
        case _:
            raise TypeError(f"not an event of tock.secrets: {type(event).__name__}")
    return state


def fold_store(events: Iterable[SecretsTopicEvent]) -> StoredSecrets:
    state = StoredSecrets()
    for event in events:
        evolve_store(state, event)
    return state


def variable_set(fernet: Fernet, key: str, value: str, description: str | None, by: str, at: float) -> VariableSet:
    return VariableSet(key=key, value_encrypted=encrypt(fernet, value), description=description or "", set_by=by,
                       at=at)


def connection_set(fernet: Fernet, conn_id: str, fields: dict[str, Any], by: str, at: float) -> ConnectionSet:
    """A ConnectionSet of the connection's JSON form ``fields`` (conn_type, host, login, password, ...):
    everything but its type and description encrypted."""
    body = {name: value for name, value in fields.items() if name != "description" and value is not None}
    return ConnectionSet(conn_id=conn_id, conn_type=fields.get("conn_type") or "",
                         description=fields.get("description") or "",
                         connection_encrypted=encrypt(fernet, json.dumps(body, sort_keys=True)), set_by=by, at=at)


def variable_value(fernet: Fernet, stored: VariableSet) -> str:
    return decrypt(fernet, stored.value_encrypted, f"variable {stored.key}")


def connection_fields(fernet: Fernet, stored: ConnectionSet) -> dict[str, Any]:
    """The stored connection's JSON form (its description included when it has one)."""
    fields: dict[str, Any] = json.loads(decrypt(fernet, stored.connection_encrypted, f"connection {stored.conn_id}"))
    return {**fields, "description": stored.description} if stored.description else fields


class TockStore:
    """The store as a backend: read once per process (the whole topic, to its end), then cached; what
    this process sets is applied to the cache as it is appended."""

    name = "store"

    def __init__(self, settings: Settings, fernet: Fernet | None = None, *, writer: str = "task") -> None:
        self._settings, self._key, self._writer = settings, fernet, writer
        self._state: StoredSecrets | None = None

    @property
    def _fernet(self) -> Fernet:
        # Resolved at the first use: a process that never reaches the store needs no key.
        if self._key is None:
            self._key = fernet_of(self._settings)
        return self._key

    def state(self) -> StoredSecrets:
        if self._state is None:
            self._state = read_store(self._settings)
        return self._state

    def get_variable(self, key: str) -> str | None:
        stored = self.state().variables.get(key)
        return None if stored is None else variable_value(self._fernet, stored)

    def get_connection(self, conn_id: str) -> str | None:
        stored = self.state().connections.get(conn_id)
        return None if stored is None else json.dumps(connection_fields(self._fernet, stored))

    def set_variable(self, key: str, value: str, description: str | None) -> None:
        self.append(variable_set(self._fernet, key, value, description, self._writer, time.time()))

    def delete_variable(self, key: str) -> None:
        self.append(VariableDeleted(key=key, deleted_by=self._writer, at=time.time()))

    def set_connection(self, conn_id: str, fields: dict[str, Any]) -> None:
        self.append(connection_set(self._fernet, conn_id, fields, self._writer, time.time()))

    def delete_connection(self, conn_id: str) -> None:
        self.append(ConnectionDeleted(conn_id=conn_id, deleted_by=self._writer, at=time.time()))

    def append(self, event: SecretsTopicEvent) -> None:
        """Append ``event`` and wait for the broker's acknowledgement; then it is in this store's cache."""
        append_secrets(self._settings, [event])
        evolve_store(self.state(), event)


def read_store(settings: Settings) -> StoredSecrets:
    """tock.secrets read to its end (every partition), folded."""
    from infra.log import replay

    return fold_store(record.event for record in replay(settings, SECRETS, client_id="tock-secrets")
                      if isinstance(record.event, VariableSet | VariableDeleted | ConnectionSet | ConnectionDeleted))


def append_secrets(settings: Settings, events: list[SecretsTopicEvent], timeout: float = 30.0) -> None:
    from infra.log import KafkaEventLog

    with KafkaEventLog(settings, client_id="tock-secrets") as event_log:
        for event in events:
            event_log.append(event)
        event_log.flush(timeout)
