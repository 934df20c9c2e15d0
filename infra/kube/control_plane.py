"""The local Kubernetes control plane: a real etcd and kube-apiserver on loopback, and one node agent.

Binaries come from ``infra/scripts/build-kube.sh`` (built once per machine into
``settings.kube_cache``); credentials, etcd's data, pid files and logs live under
``<TOCK_HOME>/kube`` and survive stop/start. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import http.client
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from infra import kube_client
from infra.broker import pid_alive, port_open
from infra.kube import agent
from infra.kube.certs import Credentials, CredentialsError, ensure_credentials
from infra.kube.commands import apiserver_command, etcd_command
from infra.kube.kubeconfig import CONTEXT, write_kubeconfig
from infra.kube.processes import DetachedProcess
from infra.settings import Settings

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build-kube.sh"
K8S_VERSION = "1.35.4"
ETCD_VERSION = "3.6.5"


class KubeError(RuntimeError):
    """The local control plane cannot be built, started or reached; the message says what to do."""


@dataclass(frozen=True)
class KubeStatus:
    etcd_pid: int | None
    apiserver_pid: int | None
    agent_pid: int | None
    ready: bool
    server: str
    agent_note: str = ""

    @property
    def running(self) -> bool:
        return self.etcd_pid is not None or self.apiserver_pid is not None

    def describe(self) -> str:
        pids = f"kube-apiserver pid {self.apiserver_pid}, etcd pid {self.etcd_pid}"
        if self.ready:
            return f"running ({pids}), ready at {self.server}; {self.describe_agent()}"
        if self.running:
            return f"starting or broken ({pids}), not ready at {self.server}"
        return "stopped"

    def describe_agent(self) -> str:
        if self.agent_pid is not None:
            return f"node agent running (pid {self.agent_pid})"
        return self.agent_note or "node agent not running"


class LocalKube:
    """Starts, stops and inspects the local control plane described by the settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.home / "kube"
        logs = self.root / "logs"
        self.etcd = DetachedProcess("etcd", self.root / "etcd.pid", logs / "etcd.log", b"etcd-")
        self.apiserver = DetachedProcess("kube-apiserver", self.root / "apiserver.pid",
                                         logs / "apiserver.log", b"kube-apiserver")
        self.agent = DetachedProcess("node agent", self.root / "node-agent.pid",
                                     logs / "node-agent.log", agent.MARKER)
        self.credentials = Credentials(self.root / "pki")
        self.server = f"https://127.0.0.1:{settings.kube_apiserver_port}"

    # -- queries -------------------------------------------------------------
    def status(self) -> KubeStatus:
        apiserver_pid = self.apiserver.live_pid()
        ready = apiserver_pid is not None and self._apiserver_ready()
        return KubeStatus(self.etcd.live_pid(), apiserver_pid, self.agent.live_pid(), ready, self.server)

    @property
    def bin_dir(self) -> Path:
        return self.settings.kube_cache / f"v{K8S_VERSION}" / "bin"

    def built(self) -> bool:
        """Whether kube-apiserver and etcd are in the cache (a start will not build)."""
        return all(os.access(path, os.X_OK) for path in self._binaries(self.bin_dir))

    # -- commands ------------------------------------------------------------
    def start(self, with_agent: bool = True, timeout: float = 90.0) -> KubeStatus:
        """Start whatever is not running (building once if needed); return when /readyz answers,
        the kubeconfig is written and the namespace exists. Idempotent."""
        self._refuse_foreign_kubeconfig()
        etcd_binary, apiserver_binary = self._binaries(self.build())
        deadline = time.monotonic() + timeout
        try:
            credentials = ensure_credentials(self.credentials.folder)
        except CredentialsError as error:
            raise KubeError(str(error)) from None
        self._ensure_etcd(etcd_binary, deadline)
        self._ensure_apiserver(apiserver_binary, credentials, deadline)
        self._write_kubeconfig(credentials)
        self._ensure_namespace()
        note = "node agent not started (asked not to)"
        if with_agent:
            note = self._ensure_agent(time.monotonic() + timeout)
        return KubeStatus(self.etcd.live_pid(), self.apiserver.live_pid(), self.agent.live_pid(),
                          True, self.server, note)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the node agent, the API server and etcd (SIGTERM, then SIGKILL after ``timeout``).
        Data and credentials stay. False if nothing was running."""
        stopped = [process.stop(timeout) for process in (self.agent, self.apiserver, self.etcd)]
        return any(stopped)

    def build(self) -> Path:
        """Run build-kube.sh (returns at once once built; its progress goes to stderr)."""
        environment = {**os.environ, "K8S_VERSION": K8S_VERSION, "ETCD_VERSION": ETCD_VERSION,
                       "TOCK_KUBE_CACHE": str(self.settings.kube_cache)}
        result = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, env=environment)
        if result.returncode != 0:
            raise KubeError(f"{BUILD_SCRIPT} failed (exit {result.returncode}); its messages are above")
        return Path(result.stdout.strip().splitlines()[-1])

    # -- internals -----------------------------------------------------------
    @staticmethod
    def _binaries(bin_dir: Path) -> tuple[Path, Path]:
        return bin_dir / f"etcd-{ETCD_VERSION}", bin_dir / "kube-apiserver"

    def _ensure_etcd(self, binary: Path, deadline: float) -> None:
        port = self.settings.kube_etcd_port
        pid = self.etcd.live_pid()
        if pid is None:
            self._refuse_taken_ports("etcd", port, port + 1, hint="TOCK_KUBE_ETCD_PORT")
            data_dir = self.root / "etcd"
            data_dir.mkdir(parents=True, exist_ok=True)
            data_dir.chmod(0o700)
            pid = self.etcd.launch(etcd_command(binary, data_dir, port))
        self._wait(self.etcd, pid, lambda: _answers_ok(f"http://127.0.0.1:{port}/health"), deadline, "healthy")

    def _ensure_apiserver(self, binary: Path, credentials: Credentials, deadline: float) -> None:
        port = self.settings.kube_apiserver_port
        pid = self.apiserver.live_pid()
        if pid is None:
            self._refuse_taken_ports("kube-apiserver", port, hint="TOCK_KUBE_APISERVER_PORT")
            pid = self.apiserver.launch(apiserver_command(binary, credentials, port, self.settings.kube_etcd_port))
        self._wait(self.apiserver, pid, self._apiserver_ready, deadline, "ready (/readyz)")

    def _refuse_foreign_kubeconfig(self) -> None:
        path = self.settings.resolved_kubeconfig
        if path.exists() and not _is_ours(path):
            raise KubeError(f"{path} is a kubeconfig `tock kube start` did not write (TOCK_KUBECONFIG); "
                            "unset TOCK_KUBECONFIG to use <TOCK_HOME>/kube/kubeconfig, or point it at a new file")

    def _write_kubeconfig(self, credentials: Credentials) -> None:
        write_kubeconfig(self.settings.resolved_kubeconfig, self.server, credentials)

    def _ensure_namespace(self) -> None:
        namespace = self.settings.kube_namespace
        try:
            with kube_client.kube_api(self.settings) as api:
                kube_client.ensure_namespace(api, namespace)
        except (ApiException, kube_client.KubeConfigError, urllib3.exceptions.HTTPError) as error:
            raise KubeError(f"could not create the namespace {namespace} at {self.server}: {error}") from None

    def _ensure_agent(self, deadline: float) -> str:
        if self.agent.live_pid() is not None:
            return ""
        if not agent.agent_installed(self.settings):
            return "node agent not started: this installation has no `tock node-agent` command"
        pid = self.agent.launch(agent.agent_command(self.settings), agent.agent_environment(self.settings))
        node = agent.node_name(self.settings)
        self._wait(self.agent, pid, lambda: self._node_registered(node), deadline, f"registered as node {node}")
        return ""

    def _node_registered(self, name: str) -> bool:
        with kube_client.kube_api(self.settings) as api:
            try:
                client.CoreV1Api(api).read_node(name)
            except ApiException as error:
                if error.status == 404:
                    return False
                raise
        return True

    def _refuse_taken_ports(self, what: str, *ports: int, hint: str) -> None:
        taken = [port for port in ports if port_open("127.0.0.1", port)]
        if taken:
            raise KubeError(f"port {taken[0]} is taken by a process that is not this TOCK_HOME's {what}; "
                            f"stop it or set {hint}")

    def _wait(self, process: DetachedProcess, pid: int, condition: Callable[[], bool], deadline: float,
              state: str) -> None:
        while True:
            if not pid_alive(pid):
                raise KubeError(f"{process.name} (pid {pid}) exited during start-up; see {process.log_file}:\n"
                                f"{_tail(process.log_file)}")
            if condition():
                return
            if time.monotonic() > deadline:
                raise KubeError(f"{process.name} was not {state} in time; see {process.log_file}")
            time.sleep(0.2)

    def _apiserver_ready(self) -> bool:
        if not self.credentials.token_file.exists():
            return False
        context = ssl.create_default_context(cafile=str(self.credentials.ca_cert))
        headers = {"Authorization": f"Bearer {self.credentials.admin_token()}"}
        return _answers_ok(f"{self.server}/readyz", context, headers)


def _answers_ok(url: str, context: ssl.SSLContext | None = None, headers: dict | None = None) -> bool:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status == 200
    except (OSError, http.client.HTTPException):
        return False


def _is_ours(path: Path) -> bool:
    try:
        return yaml.safe_load(path.read_text()).get("current-context") == CONTEXT
    except (OSError, yaml.YAMLError, AttributeError):
        return False


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
