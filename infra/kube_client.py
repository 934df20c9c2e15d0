"""A Kubernetes API client for Tock's executor and node agent, from the settings' kubeconfig.

Each call builds its own ``ApiClient`` from ``settings.resolved_kubeconfig``; the client
library's global default configuration is never loaded or changed. Every request it makes has a
timeout (``TOCK_KUBE_REQUEST_TIMEOUT`` unless the call gives its own, as a watch does): the client
library has none by default, and an API server that accepts connections but never answers would
hold its caller for ever. A request is retried once at most, so it takes at most twice the timeout.
"""

from __future__ import annotations

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from urllib3 import Retry

from infra.settings import Settings


class KubeConfigError(RuntimeError):
    """The kubeconfig is missing or unreadable; the message says which file and what to do."""


class TimedApiClient(client.ApiClient):
    """An ApiClient whose requests time out after ``request_timeout`` seconds unless told otherwise."""

    def __init__(self, configuration: client.Configuration, request_timeout: float) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        timeout = self.request_timeout if _request_timeout is None else _request_timeout
        return super().call_api(method, url, header_params, body, post_params, _request_timeout=timeout)


def kube_api(settings: Settings) -> client.ApiClient:
    """A fresh API client for the cluster of ``settings.resolved_kubeconfig``; each request times out
    after ``settings.kube_request_timeout`` seconds unless it says otherwise."""
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
    # One retry at most (a pooled connection the server had closed), not urllib3's three: a request
    # then takes at most twice the timeout.
    configuration.retries = Retry(total=1, connect=1, read=1, status=0, redirect=0, other=0)
    return TimedApiClient(configuration, settings.kube_request_timeout)


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
