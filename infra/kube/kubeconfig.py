"""The kubeconfig of the local API server: its CA inline, its URL and the admin's bearer token."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from infra.kube.certs import Credentials

CONTEXT = "tock-local"


def kubeconfig_document(server: str, credentials: Credentials) -> dict:
    """A self-contained kubeconfig (the CA is inline, so the file can be copied elsewhere)."""
    ca_data = base64.b64encode(credentials.ca_cert.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": "tock-admin", "user": {"token": credentials.admin_token()}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "tock-admin"}}],
        "current-context": CONTEXT,
    }


def write_kubeconfig(path: Path, server: str, credentials: Credentials) -> Path:
    """Write (atomically, mode 0600: it holds a token) the kubeconfig at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(yaml.safe_dump(kubeconfig_document(server, credentials), sort_keys=False))
    partial.chmod(0o600)
    os.replace(partial, path)
    return path
