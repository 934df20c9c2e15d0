"""The local control plane's pure parts: command lines, the node agent's name and settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.kube.agent import agent_environment, node_name
from infra.kube.certs import Credentials
from infra.kube.commands import apiserver_command, etcd_command
from infra.settings import load_settings


@pytest.mark.parametrize(("host", "expected"), [
    ("vm", "vm-agent"), ("Build_Host.example", "build-host.example-agent"), ("--", "agent"),
])
def test_the_node_agent_is_named_after_the_host_as_a_valid_node_name(host, expected):
    assert node_name(load_settings({"TOCK_HOSTNAME": host})) == expected


def test_etcd_listens_on_loopback_with_its_peer_port_next_to_the_client_port():
    command = etcd_command(Path("/bin/etcd"), Path("/data"), 12379)
    assert command[command.index("--listen-client-urls") + 1] == "http://127.0.0.1:12379"
    assert command[command.index("--initial-cluster") + 1] == "tock=http://127.0.0.1:12380"
    assert "--unsafe-no-fsync" in command


def test_the_api_server_uses_the_credentials_and_etcd_it_is_given():
    command = apiserver_command(Path("/bin/kube-apiserver"), Credentials(Path("/pki")), 16443, 12379)
    assert {"--secure-port=16443", "--etcd-servers=http://127.0.0.1:12379", "--bind-address=127.0.0.1",
            "--token-auth-file=/pki/tokens.csv", "--disable-admission-plugins=ServiceAccount"} <= set(command)


def test_the_agent_gets_exactly_the_settings_that_were_set(monkeypatch):
    monkeypatch.setenv("TOCK_PARTITIONS", "99")  # the caller's environment does not leak in
    settings = load_settings({"TOCK_HOME": "/h", "TOCK_KUBE_NAMESPACE": "ns"})
    ours = {key: value for key, value in agent_environment(settings).items() if key.startswith("TOCK_")}
    assert ours == {"TOCK_HOME": "/h", "TOCK_KUBE_NAMESPACE": "ns"}
