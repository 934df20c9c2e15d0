"""Shared fixtures: one real broker and PostgreSQL per session, started through infra/.

A service that cannot be started fails the tests that need it; nothing is skipped.
Each test gets its own topic prefix (and, for PostgreSQL, its own schema).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest

from infra.broker import LocalKafkaBroker
from infra.kube import KubeError, LocalKube
from infra.settings import Settings, load_settings
from tests.ports import free_port, free_ports

# Timing stays out of pass/fail: Hypothesis's per-example deadline and its "too slow" health check
# fail a property on a busy machine for being slow, not for being wrong.
hypothesis.settings.register_profile("tock", deadline=None,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("tock")

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "infra" / "scripts"
TEST_PARTITIONS = 3


def _infra_home() -> Path:
    # The Makefile exports TOCK_HOME=<repo>/.tock; plain `pytest` uses the same place.
    return Path(os.environ.get("TOCK_HOME", REPO / ".tock"))


def _infra_settings() -> Settings:
    """The session's own settings: the TOCK_* environment (ports, bootstrap), home as above."""
    environment = {key: value for key, value in os.environ.items() if key.startswith("TOCK_")}
    return load_settings({**environment, "TOCK_HOME": str(_infra_home())})


def _run_script(name: str, *args: str) -> str:
    result = subprocess.run(["bash", str(SCRIPTS / name), *args], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"infra/scripts/{name} {' '.join(args)} failed:\n{result.stderr}", pytrace=False)
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap address of the session's real broker (the local one unless configured)."""
    settings = _infra_settings()
    if not settings.uses_local_broker:
        return settings.bootstrap
    return LocalKafkaBroker(settings).start().address


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL (psycopg 3 dialect) of the session's real PostgreSQL database."""
    return _run_script("postgres.sh", "start").replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the session's real Redis (the Celery broker); tests keep apart by topic prefix,
    which Celery puts in front of every key."""
    return _run_script("redis.sh", "start")


@pytest.fixture(scope="session")
def schema_registry_url() -> str:
    """The Confluent-compatible API of the session's real schema registry (Apicurio, its schemas in the
    session's PostgreSQL); tests keep apart by topic prefix, which is part of every subject."""
    return _run_script("schema-registry.sh", "start")


@pytest.fixture(autouse=True)
def _close_shared_logs() -> Iterator[None]:
    """Close the producers the test's helpers shared (tests/shared_log.py) when it ends."""
    yield
    shared = sys.modules.get("tests.shared_log")  # not imported by tests that append nothing
    if shared is not None:
        shared.close_shared_logs()


@pytest.fixture
def topic_prefix(kafka_bootstrap: str) -> Iterator[str]:
    """A fresh topic prefix; the test's topics are deleted afterwards, so a long-lived
    development broker does not pile up every test's partitions (and run out of heap)."""
    prefix = f"t{uuid.uuid4().hex[:12]}."
    yield prefix
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    mine = [name for name in admin.list_topics(timeout=30).topics if name.startswith(prefix)]
    if mine:
        for future in admin.delete_topics(mine, operation_timeout=30).values():
            future.result()


@pytest.fixture
def make_settings(tmp_path: Path, kafka_bootstrap: str, topic_prefix: str,
                  schema_registry_url: str) -> Callable[..., Settings]:
    """Settings for this test: its own home, topic prefix and SQLite file, records in the Schema
    Registry wire format through the session's registry; overrides by keyword."""

    def make(**overrides: str) -> Settings:
        values = {
            "TOCK_HOME": str(tmp_path / "home"),
            "TOCK_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "TOCK_TOPIC_PREFIX": topic_prefix,
            "TOCK_PARTITIONS": str(TEST_PARTITIONS),
            "TOCK_SCHEMA_REGISTRY_URL": schema_registry_url,
        }
        values.update({f"TOCK_{key.upper()}": str(value) for key, value in overrides.items()})
        return load_settings(values)

    return make


@pytest.fixture
def kafka_settings(make_settings: Callable[..., Settings]) -> Settings:
    """Settings for this test with its topics created on the real broker."""
    from confluent_kafka.admin import AdminClient

    from infra.topics import ensure_topics

    settings = make_settings()
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix,
                  settings.partitions)
    # No shared producer is opened here: tests on this fixture count this process's own
    # descriptors and children (the DAG processor's), and a producer connecting meanwhile adds pipes.
    return settings


# -- Kubernetes: one real control plane (etcd + kube-apiserver) per session ---------------------


@dataclass(frozen=True)
class KubeTarget:
    """A test's place in the session's cluster: its kubeconfig and its own namespace."""

    kubeconfig: Path
    namespace: str

    @property
    def overrides(self) -> dict[str, str]:
        """Keyword overrides for ``make_settings``: ``make_settings(**target.overrides)``."""
        return {"kubeconfig": str(self.kubeconfig), "kube_namespace": self.namespace}


def _kube_session_settings(home: Path) -> Settings:
    """The TOCK_* environment with a home of its own and free ports (TOCK_KUBE_*_PORT override);
    never TOCK_KUBECONFIG, so a developer's kubeconfig is neither used nor overwritten."""
    environment = {key: value for key, value in os.environ.items()
                   if key.startswith("TOCK_") and key not in ("TOCK_KUBECONFIG", "TOCK_HOME")}
    apiserver = free_port()
    ports = {"TOCK_KUBE_APISERVER_PORT": str(apiserver), "TOCK_KUBE_ETCD_PORT": str(free_ports(2, apiserver))}
    return load_settings({**ports, **environment, "TOCK_HOME": str(home)})


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The session's own real kube-apiserver and etcd (no node agent: tests start their own),
    under a home of the session; returns the Settings it was started with
    (``.resolved_kubeconfig``, ``.kube_apiserver_port``, ...). Stopped at the end of the session."""
    local = LocalKube(_kube_session_settings(tmp_path_factory.mktemp("kube-home")))
    if not local.built():
        pytest.fail(f"kube-apiserver and etcd are not built in {local.bin_dir}: run `make kube` "
                    "(infra/scripts/build-kube.sh, once per machine, ~13 minutes)", pytrace=False)
    try:
        local.start(with_agent=False)
    except KubeError as error:
        local.stop()
        pytest.fail(f"the session's Kubernetes control plane did not start: {error}", pytrace=False)
    yield local.settings
    local.stop()


@pytest.fixture
def kube_namespace(kube_cluster: Settings) -> Iterator[KubeTarget]:
    """A fresh namespace (with its default ServiceAccount) in the session's cluster, deleted afterwards."""
    from infra.kube_client import ensure_namespace, kube_api

    target = KubeTarget(kube_cluster.resolved_kubeconfig, f"t-{uuid.uuid4().hex[:12]}")
    with kube_api(kube_cluster) as api:
        ensure_namespace(api, target.namespace)
    yield target
    with kube_api(kube_cluster) as api:
        _delete_namespace(api, target.namespace)


def _delete_namespace(api, name: str) -> None:
    """Delete the namespace's pods at once, then the namespace. No namespace controller runs
    beside the local API server, so its finalizer is cleared here, as that controller would."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    core.delete_namespace(name)
    core.replace_namespace_finalize(name, client.V1Namespace(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1NamespaceSpec(finalizers=[])))
