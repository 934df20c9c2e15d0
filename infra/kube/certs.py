"""The local control plane's credentials, made once with ``openssl`` and kept across restarts.

A CA; the API server's certificate signed by it (SAN ``IP:127.0.0.1, DNS:localhost``); an RSA
key pair that signs and checks service-account tokens; and a static token file whose one
random token is an admin in ``system:masters``. Kept, so a kubeconfig written once stays valid.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes.default.svc
"""


class CredentialsError(RuntimeError):
    """openssl is missing or failed; the message names the command and its output."""


@dataclass(frozen=True)
class Credentials:
    """Paths of the files under ``<TOCK_HOME>/kube/pki``."""

    folder: Path

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.folder / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.folder / "tokens.csv"

    def admin_token(self) -> str:
        return self.token_file.read_text().split(",", 1)[0].strip()


def ensure_credentials(folder: Path) -> Credentials:
    """Create whatever credential is missing under ``folder``; existing ones are kept."""
    credentials = Credentials(folder)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    if not credentials.ca_cert.exists():
        _make_ca(credentials)
    if not credentials.server_cert.exists():
        _make_server_cert(credentials)
    if not credentials.service_account_public_key.exists():
        _make_service_account_keys(credentials)
    if not credentials.token_file.exists():
        credentials.token_file.write_text(f"{secrets.token_hex(24)},admin,admin,system:masters\n")
        credentials.token_file.chmod(0o600)
    return credentials


def _make_ca(credentials: Credentials) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
             "-keyout", credentials.ca_key, "-out", credentials.ca_cert, "-subj", "/CN=tock-local-kube-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _make_server_cert(credentials: Credentials) -> None:
    request = credentials.folder / "apiserver.csr"
    extensions = credentials.folder / "apiserver.ext"
    extensions.write_text(SERVER_EXTENSIONS)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", credentials.server_key,
             "-out", request, "-subj", "/CN=kube-apiserver")
    _openssl("x509", "-req", "-in", request, "-CA", credentials.ca_cert, "-CAkey", credentials.ca_key,
             "-CAcreateserial", "-days", "3650", "-extfile", extensions, "-out", credentials.server_cert)


def _make_service_account_keys(credentials: Credentials) -> None:
    _openssl("genrsa", "-out", credentials.service_account_key, "2048")
    _openssl("rsa", "-in", credentials.service_account_key, "-pubout",
             "-out", credentials.service_account_public_key)


def _openssl(*args: str | Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CredentialsError("openssl not found: the local API server's certificates are made with it "
                               "(apt-get install openssl)")
    command = [openssl, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise CredentialsError(f"{' '.join(command)} failed:\n{result.stderr.strip()}")
