"""A real etcd + kube-apiserver for the node agent's tests, and agents as real processes.

Minimal on purpose (to be replaced by the shared ``kube_cluster`` fixture): binaries from
infra/scripts/build-kube.sh's cache, free loopback ports, a tmp home, openssl certificates,
token auth, AlwaysAllow, no ServiceAccount admission. A missing binary fails; never skips.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KUBE_BIN = Path.home() / ".cache" / "tock" / "kube" / "v1.35.4" / "bin"
TOKEN = "node-agent-tests-token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition: Callable[[], object], seconds: float, what: str, every: float = 0.1):
    """The condition's first truthy value, or a failure naming what did not happen in time."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(every)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder: Path) -> None:
    """CA, a server certificate for 127.0.0.1/localhost, a service-account key pair, a token file."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=tock-test-ca", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=folder)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
    (folder / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")


def kubeconfig_text(ca: Path, port: int) -> str:
    return f"""apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "https://127.0.0.1:{port}", certificate-authority: "{ca}"}}}}]
users: [{{name: admin, user: {{token: {TOKEN}}}}}]
contexts: [{{name: test, context: {{cluster: test, user: admin}}}}]
current-context: test
"""


@dataclass
class KubeServers:
    """etcd + kube-apiserver processes of one test session."""

    home: Path
    etcd_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.home / "kubeconfig"

    def start(self) -> KubeServers:
        for binary in ("etcd-3.6.5", "kube-apiserver"):
            if not (KUBE_BIN / binary).is_file():
                pytest.fail(f"{KUBE_BIN / binary} is missing: run infra/scripts/build-kube.sh", pytrace=False)
        make_certificates(self.home / "pki")
        self.kubeconfig.write_text(kubeconfig_text(self.home / "pki" / "ca.crt", self.api_port))
        self._start_etcd()
        self.start_apiserver()
        return self

    def _start_etcd(self) -> None:
        peer = free_port()
        self.processes["etcd"] = self._spawn("etcd", [
            str(KUBE_BIN / "etcd-3.6.5"), "--name", "test", "--data-dir", str(self.home / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}", "--initial-cluster", f"test=http://127.0.0.1:{peer}", "--unsafe-no-fsync"])

    def start_apiserver(self) -> None:
        pki = self.home / "pki"
        self.processes["apiserver"] = self._spawn("apiserver", [
            str(KUBE_BIN / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--tls-cert-file={pki / 'server.crt'}", f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=AlwaysAllow", "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--profiling=false"])
        wait_for(self._ready, 60, "kube-apiserver /readyz")

    def stop_apiserver(self) -> None:
        _stop(self.processes.pop("apiserver"))

    def stop(self) -> None:
        for name in ("apiserver", "etcd"):
            if name in self.processes:
                _stop(self.processes.pop(name))

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "ab")
        return subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def _ready(self) -> bool:
        import ssl
        import urllib.request

        context = ssl.create_default_context(cafile=str(self.home / "pki" / "ca.crt"))
        request = urllib.request.Request(f"https://127.0.0.1:{self.api_port}/readyz",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class AgentProcess:
    """``tock node-agent --node NAME`` as a real process."""

    node: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> int:
        """SIGTERM (a clean stop) and its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def start_agent(node: str, kubeconfig: Path, namespace: str, home: Path) -> AgentProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("TOCK_")}
    environment |= {"PYTHONPATH": str(REPO), "TOCK_HOME": str(home), "TOCK_KUBECONFIG": str(kubeconfig),
                    "TOCK_KUBE_NAMESPACE": namespace}
    log = home / f"agent-{node}-{uuid.uuid4().hex[:6]}.log"
    home.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        process = subprocess.Popen([sys.executable, "-m", "tock.cli", "node-agent", "--node", node,
                                    "--lease-seconds", "1"], env=environment, stdout=output, stderr=output,
                                   cwd=REPO)
    agent = AgentProcess(node, process, log)
    wait_for(lambda: process.poll() is not None or "registered" in log.read_text(), 30, f"agent {node} to start")
    assert process.poll() is None, f"agent {node} exited at start:\n{log.read_text()[-3000:]}"
    return agent


@pytest.fixture(scope="session")
def kube_servers(tmp_path_factory) -> KubeServers:
    """The session's real etcd + kube-apiserver."""
    servers = KubeServers(tmp_path_factory.mktemp("kube")).start()
    yield servers
    servers.stop()


@pytest.fixture
def kube_core(kube_servers):
    """A CoreV1Api on the session's API server."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(kube_servers.kubeconfig))
    yield client.CoreV1Api(api_client)
    api_client.close()


@pytest.fixture
def namespace(kube_core) -> str:
    """A fresh namespace for the test's pods."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube_core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def agents(kube_servers, namespace, tmp_path):
    """Start agents with ``agents(node)``; whatever still runs at the end is killed (its pods with it)."""
    started: list[AgentProcess] = []

    def start(node: str, home: Path | None = None) -> AgentProcess:
        started.append(start_agent(node, kube_servers.kubeconfig, namespace, home or tmp_path / node))
        return started[-1]

    yield start
    for agent in started:
        if agent.process.poll() is None:
            agent.kill()
