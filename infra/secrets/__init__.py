"""Adapters of the secrets chain (tock/secrets): environment, secrets file, Kubernetes Secrets, Tock's
store, and :func:`secrets_backends`, the backends of a process from its settings, in order.

Order (first hit wins): ``TOCK_VAR_*`` / ``TOCK_CONN_*`` environment variables, the secrets file
(``TOCK_SECRETS_FILE``), Kubernetes Secrets (``TOCK_SECRETS_KUBE_NAMESPACE``), Tock's store (tock.secrets).
A backend answers a variable's text, or a connection's URI or JSON text (tock/connections.py parses
it): infra knows nothing of the SDK's classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from infra.secrets.env import EnvironmentSecrets
from infra.settings import Settings


class SecretsBackend(Protocol):
    """The port every adapter here fills (tock.secrets.SecretsBackend is the same shape)."""

    name: str

    def get_variable(self, key: str) -> str | None: ...

    def get_connection(self, conn_id: str) -> str | None: ...


def secrets_backends(settings: Settings, environ: Mapping[str, str], *, writer: str = "task") -> list[SecretsBackend]:
    """The backends of a process with ``settings``; ``environ`` is read now (the runner's child calls
    this before it clears Tock's variables from user code's environment). Kafka and the Kubernetes API
    are reached only when a lookup gets that far. ``writer``: who the store's records name as writer."""
    backends: list[SecretsBackend] = [EnvironmentSecrets(environ)]
    if settings.secrets_file is not None:
        from infra.secrets.file import FileSecrets

        backends.append(FileSecrets(settings.secrets_file))
    if settings.secrets_kube_namespace is not None:
        from infra.kube_client import kube_api
        from infra.secrets.kube import KubernetesSecrets

        backends.append(KubernetesSecrets(lambda: kube_api(settings), settings.secrets_kube_namespace))
    from infra.secrets.store import TockStore

    backends.append(TockStore(settings, writer=writer))
    return backends
