"""Command lines of etcd and kube-apiserver for a loopback-only, single-node control plane.

Pure: paths and ports in, argv out. The flags are those measured in
docs "A real Kubernetes API server on this machine" (the reference of issue 11).
"""

from __future__ import annotations

from pathlib import Path

from infra.kube.certs import Credentials

ETCD_MEMBER = "tock"


def etcd_command(binary: Path, data_dir: Path, client_port: int) -> list[str]:
    """etcd on 127.0.0.1 (peer port = client port + 1). No fsync: a local test store, not a cluster's."""
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{client_port + 1}"
    return [str(binary), "--name", ETCD_MEMBER, "--data-dir", str(data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{ETCD_MEMBER}={peer}",
            "--unsafe-no-fsync", "--log-level", "warn"]


def apiserver_command(binary: Path, credentials: Credentials, port: int, etcd_port: int) -> list[str]:
    """kube-apiserver on 127.0.0.1: static-token admin, AlwaysAllow, no controllers needed.

    Without a controller manager nothing creates service accounts, hence no ServiceAccount
    admission; with a loopback advertise address the endpoint reconciler only complains, hence none.
    """
    return [str(binary),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={credentials.server_cert}", f"--tls-private-key-file={credentials.server_key}",
            f"--client-ca-file={credentials.ca_cert}", f"--token-auth-file={credentials.token_file}",
            "--authorization-mode=AlwaysAllow",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={credentials.service_account_public_key}",
            f"--service-account-signing-key-file={credentials.service_account_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false",
            "--profiling=false", f"--cert-dir={credentials.folder}"]
