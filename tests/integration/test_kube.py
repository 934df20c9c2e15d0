"""The local Kubernetes control plane: `tock kube start|status|stop`, idempotent, and the session's
cluster reachable through the official client.

The CLI tests use their own TOCK_HOME and ports, so the session's cluster is never touched;
they pass --no-agent (a node agent is not what is tested here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from kubernetes import client

from infra.kube import LocalKube
from infra.kube_client import kube_api
from infra.settings import load_settings
from tests.ports import free_port, free_ports


@pytest.fixture
def private_env(tmp_path):
    env = {"TOCK_HOME": str(tmp_path / "home"), "TOCK_KUBE_APISERVER_PORT": str(apiserver := free_port()),
           "TOCK_KUBE_ETCD_PORT": str(free_ports(2, apiserver))}
    yield env
    LocalKube(load_settings(env)).stop()


def tock(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TOCK_")}
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=180)


def config_maps(env: dict[str, str], namespace: str = "tock") -> list[str]:
    with kube_api(load_settings(env)) as api:
        return [item.metadata.name for item in client.CoreV1Api(api).list_namespaced_config_map(namespace).items]


def put_config_map(settings, namespace: str, name: str, data: dict[str, str]) -> None:
    with kube_api(settings) as api:
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)
        client.CoreV1Api(api).create_namespaced_config_map(namespace, body)


def test_start_status_stop_are_idempotent_and_data_survives_a_restart(private_env):
    stopped = tock(private_env, "kube", "status")
    assert stopped.returncode == 3 and "stopped" in stopped.stdout
    first = tock(private_env, "kube", "start", "--no-agent")
    assert first.returncode == 0, first.stderr
    port = private_env["TOCK_KUBE_APISERVER_PORT"]
    assert f"ready at https://127.0.0.1:{port}" in first.stdout
    again = tock(private_env, "kube", "start", "--no-agent")
    assert again.returncode == 0 and again.stdout.splitlines()[0] == first.stdout.splitlines()[0]  # same pids
    assert tock(private_env, "kube", "status").returncode == 0
    put_config_map(load_settings(private_env), "tock", "kept", {"a": "1"})

    assert tock(private_env, "kube", "stop").stdout.strip() == "kube stopped"
    assert tock(private_env, "kube", "stop").stdout.strip() == "kube was not running"
    assert tock(private_env, "kube", "status").returncode == 3
    assert tock(private_env, "kube", "start", "--no-agent").returncode == 0
    assert "kept" in config_maps(private_env)


def test_start_refuses_a_port_taken_by_something_else(private_env, kube_cluster):
    env = {**private_env, "TOCK_KUBE_APISERVER_PORT": str(kube_cluster.kube_apiserver_port)}
    result = tock(env, "kube", "start", "--no-agent")
    assert result.returncode == 1
    assert "is taken by a process that is not this TOCK_HOME's kube-apiserver" in result.stderr


def test_start_never_overwrites_a_kubeconfig_it_did_not_write(private_env, tmp_path):
    foreign = tmp_path / "their-kubeconfig"
    foreign.write_text("apiVersion: v1\nkind: Config\ncurrent-context: production\n")
    result = tock({**private_env, "TOCK_KUBECONFIG": str(foreign)}, "kube", "start", "--no-agent")
    assert result.returncode == 1 and "did not write" in result.stderr
    assert "production" in foreign.read_text()
    assert tock(private_env, "kube", "status").returncode == 3  # refused before starting anything


def test_the_session_cluster_serves_the_official_client(kube_cluster, kube_namespace, make_settings):
    local = LocalKube(kube_cluster)
    before = local.status()
    assert before.ready and before.agent_pid is None
    after = local.start(with_agent=False)
    assert (after.apiserver_pid, after.etcd_pid) == (before.apiserver_pid, before.etcd_pid)

    settings = make_settings(**kube_namespace.overrides)
    put_config_map(settings, kube_namespace.namespace, "greeting", {"text": "hello"})
    with kube_api(settings) as api:
        read = client.CoreV1Api(api).read_namespaced_config_map("greeting", kube_namespace.namespace)
        assert read.data == {"text": "hello"}
        assert client.VersionApi(api).get_code().git_version == "v1.35.4"
        accounts = client.CoreV1Api(api).list_namespaced_service_account(kube_namespace.namespace).items
        assert [account.metadata.name for account in accounts] == ["default"]
