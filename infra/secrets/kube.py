"""Variables and connections from Kubernetes Secrets (``TOCK_SECRETS_KUBE_NAMESPACE``), through the
official client.

Naming rule: variable ``key`` is the Secret ``tock-variable-<slug>`` with the value under data key
``value``; connection ``conn_id`` is ``tock-connection-<slug>`` with a URI or JSON under ``connection``.
``<slug>`` is the name lower-cased, each character other than a-z, 0-9, '.' and '-' replaced by '-', and
leading or trailing '-' and '.' dropped (``my_api_key`` -> ``tock-variable-my-api-key``); a name with no
letter or digit has no Secret. Several names may share a slug: a Secret may carry
the exact name in its annotation ``tock.dev/name``, and then answers that name only.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

NAME_ANNOTATION = "tock.dev/name"
VARIABLE_DATA_KEY = "value"
CONNECTION_DATA_KEY = "connection"


class KubeSecretsError(RuntimeError):
    """The API server refused or failed a Secret's read (other than not found)."""


def secret_name(kind: str, name: str) -> str | None:
    """The Secret holding variable or connection ``name`` (``kind``: "variable" or "connection"), None if
    the name makes none (a Secret's name is a DNS subdomain: 253 characters, letters or digits at its ends)."""
    slug = re.sub(r"[^a-z0-9.-]", "-", name.lower()).strip("-.")
    return f"tock-{kind}-{slug}"[:253].rstrip("-.") if slug else None


class KubernetesSecrets:
    name = "kubernetes"

    def __init__(self, api: Callable[[], client.ApiClient], namespace: str) -> None:
        self._api, self.namespace = api, namespace

    def get_variable(self, key: str) -> str | None:
        return self._read("variable", key, VARIABLE_DATA_KEY)

    def get_connection(self, conn_id: str) -> str | None:
        return self._read("connection", conn_id, CONNECTION_DATA_KEY)

    def _read(self, kind: str, name: str, data_key: str) -> str | None:
        secret_id = secret_name(kind, name)
        if secret_id is None:
            return None
        with self._api() as api:
            try:
                secret = client.CoreV1Api(api).read_namespaced_secret(secret_id, self.namespace)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise KubeSecretsError(f"cannot read Secret {self.namespace}/{secret_id} ({kind} {name}): "
                                       f"{error.status} {error.reason}") from None
        return _value(secret, name, data_key)


def _value(secret: Any, name: str, data_key: str) -> str | None:
    annotations = secret.metadata.annotations or {}
    if annotations.get(NAME_ANNOTATION, name) != name:
        return None
    encoded = (secret.data or {}).get(data_key)
    return None if encoded is None else base64.b64decode(encoded).decode()
