"""The secrets chain: where ``Variable.get`` and ``Connection.get`` look, in order, first hit wins (as
Airflow's secrets backends), and the process's masker and record of accesses.

The chain is built once per process from typed settings and installed:
``install(SecretsChain(infra.secrets.secrets_backends(settings, os.environ)))``; the runner's child
does so before it clears Tock's settings from user code's environment. Each lookup registers what
it read with the masker when it is a secret and appends ``(kind, name, backend)`` to
:func:`accesses` (the runner turns them into SecretAccessed events: names and backends, never values).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tock.secrets.errors import AirflowNotFoundException, AirflowRuntimeError, VariableNotFound
from tock.secrets.masking import Masker, is_sensitive, masked_output

if TYPE_CHECKING:
    from tock.connections import Connection

MISSING_BACKEND = "none"  # the backend of an access no backend answered


class SecretsBackend(Protocol):
    """One place variables and connections are looked up; ``name`` is what accesses record."""

    name: str

    def get_variable(self, key: str) -> str | None: ...

    def get_connection(self, conn_id: str) -> str | None:
        """The connection as a URI or as JSON text (tock.connections parses either)."""


@runtime_checkable
class WritableSecretsBackend(SecretsBackend, Protocol):
    """A backend ``Variable.set`` / ``Variable.delete`` write to (Tock's store)."""

    def set_variable(self, key: str, value: str, description: str | None) -> None: ...

    def delete_variable(self, key: str) -> None: ...


class NoWritableBackend(RuntimeError):
    """Variable.set or delete with no writable backend (Tock's store) in the chain."""


PROCESS_MASKER = Masker()  # one per process: what mask_secret registers before and after a chain is installed


@dataclass
class SecretsChain:
    """Backends looked up in order; the accesses made through it, and the masker it registers with."""

    backends: Sequence[SecretsBackend]
    masker: Masker = field(default_factory=lambda: PROCESS_MASKER)
    accessed: list[tuple[str, str, str]] = field(default_factory=list)

    def variable(self, key: str) -> str | None:
        """The value of variable ``key`` from the first backend that has it, None if none does."""
        for backend in self.backends:
            value = backend.get_variable(key)
            if value is not None:
                self._accessed("variable", key, backend.name)
                if is_sensitive(key):
                    self.masker.add(value)
                return value
        self._accessed("variable", key, MISSING_BACKEND)
        return None

    def connection(self, conn_id: str) -> Connection | None:
        """The connection ``conn_id`` from the first backend that has it, None if none does."""
        from tock.connections import Connection

        for backend in self.backends:
            text = backend.get_connection(conn_id)
            if text is not None:
                self._accessed("connection", conn_id, backend.name)
                found = Connection.parse(text, conn_id)
                self._mask_connection(found)
                return found
        self._accessed("connection", conn_id, MISSING_BACKEND)
        return None

    def __post_init__(self) -> None:
        # The optional ability, checked once here rather than on every write.
        self._writable = next((backend for backend in self.backends if isinstance(backend, WritableSecretsBackend)),
                              None)

    def writable(self) -> WritableSecretsBackend:
        if self._writable is not None:
            return self._writable
        raise NoWritableBackend("no writable secrets backend: Variable.set and Variable.delete write to Tock's "
                                "store, which this process was not configured with")

    def _mask_connection(self, connection: Connection) -> None:
        if connection.password:
            self.masker.add(connection.password)
        self.masker.add([value for key, value in connection.extra_dejson.items() if is_sensitive(key)])

    def _accessed(self, kind: str, name: str, backend: str) -> None:
        with _lock:
            self.accessed.append((kind, name, backend))


_lock = threading.Lock()
_installed: SecretsChain | None = None


def install(chain: SecretsChain) -> None:
    """Make ``chain`` the one Variable and Connection use in this process."""
    global _installed
    _installed = chain


def current_chain() -> SecretsChain:
    """The installed chain; one with no backend (every lookup misses) when none was installed."""
    global _installed
    if _installed is None:
        _installed = SecretsChain(backends=())
    return _installed


def accesses() -> list[tuple[str, str, str]]:
    """``(kind, name, backend)`` of every lookup through the installed chain, in order."""
    with _lock:
        return list(current_chain().accessed)


def mask_secret(secret: Any, name: str | None = None) -> None:
    """Mask ``secret`` (a text, or the texts in a dict or list) in this try's log from now on (Airflow's
    ``mask_secret``). With ``name``, only when the name is sensitive, as Airflow does."""
    if name is None or is_sensitive(name):
        current_chain().masker.add(secret)


def masker() -> Masker:
    """The installed chain's masker (what :func:`masked_output` should be given)."""
    return current_chain().masker


__all__ = ["AirflowNotFoundException", "AirflowRuntimeError", "Masker", "NoWritableBackend", "SecretsBackend",
           "SecretsChain", "VariableNotFound", "WritableSecretsBackend", "accesses", "current_chain", "install",
           "is_sensitive", "mask_secret", "masked_output", "masker"]
