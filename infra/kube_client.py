"""A Kubernetes API client for Tock's executor and node agent, from the settings' kubeconfig.

Each call builds its own ``ApiClient`` from ``settings.resolved_kubeconfig``; the client
library's global default configuration is never loaded or changed.
"""

from __future__ import annotations

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from infra.settings import Settings


class KubeConfigError(RuntimeError):
    """The kubeconfig is missing or unreadable; the message says which file and what to do."""


def kube_api(settings: Settings) -> client.ApiClient:
    """A fresh API client for the cluster of ``settings.resolved_kubeconfig``."""
    path = settings.resolved_kubeconfig
    if not path.is_file():
        raise KubeConfigError(f"no kubeconfig at {path}: run `tock kube start` for the local API server "
                              "or set TOCK_KUBECONFIG to a cluster's kubeconfig")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=str(path), client_configuration=configuration,
                                persist_config=False)
    except (config.ConfigException, OSError, ValueError) as error:
        raise KubeConfigError(f"cannot load the kubeconfig {path}: {error}") from error
    return client.ApiClient(configuration)


def ensure_namespace(api: client.ApiClient, name: str) -> bool:
    """Create namespace ``name`` and its ``default`` ServiceAccount if missing. True if it was created."""
    core = client.CoreV1Api(api)
    created = _create_unless_exists(lambda: core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))))
    # No controller manager runs beside the local API server, so nothing else makes this account.
    _create_unless_exists(lambda: core.create_namespaced_service_account(
        name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))))
    return created


def _create_unless_exists(create) -> bool:
    try:
        create()
    except ApiException as error:
        if error.status != 409:
            raise
        return False
    return True
