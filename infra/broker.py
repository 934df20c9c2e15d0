"""The local development broker: Apache Kafka in KRaft combined mode, one node or a cluster.

Its jars come from Maven Central (``infra/scripts/fetch-kafka.sh``); its data lives
under ``<TOCK_HOME>/broker`` (a cluster: ``node-<i>`` there, see infra/broker_config.py) and
survives stop/start. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.broker_config import LOG4J2_PROPERTIES, BrokerNode, cluster_nodes, server_properties
from infra.procfs import process_start_time
from infra.settings import Settings, port_problem, remembered_broker_nodes

FETCH_SCRIPT = Path(__file__).parent / "scripts" / "fetch-kafka.sh"


class BrokerError(RuntimeError):
    """The local broker cannot be set up, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class BrokerStatus:
    """One node's state."""

    running: bool
    ready: bool
    pid: int | None
    address: str
    node_id: int = 1

    def describe(self) -> str:
        if self.ready:
            return f"running (pid {self.pid}), ready at {self.address}"
        if self.running:
            return f"starting (pid {self.pid}), not yet accepting connections at {self.address}"
        return "stopped"


@dataclass(frozen=True)
class ClusterStatus:
    """Every node's state; ``address`` is the bootstrap list naming them all."""

    nodes: tuple[BrokerStatus, ...]

    @property
    def address(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def ready(self) -> bool:
        return all(node.ready for node in self.nodes)

    @property
    def running(self) -> bool:
        return any(node.running for node in self.nodes)

    def describe(self) -> str:
        if len(self.nodes) == 1:
            return self.nodes[0].describe()
        ready = sum(node.ready for node in self.nodes)
        lines = [f"{len(self.nodes)}-node cluster, {ready} of {len(self.nodes)} ready"]
        return "\n".join(lines + [f"  node {node.node_id}: {node.describe()}" for node in self.nodes])


class LocalKafkaBroker:
    """Starts, stops and inspects the local broker described by the settings: one node, or a
    KRaft cluster of ``nodes`` (default: TOCK_BROKER_NODES, else what the home remembers, else 1)."""

    def __init__(self, settings: Settings, nodes: int | None = None) -> None:
        self.settings = settings
        self.root = settings.home / "broker"
        self.node_count = nodes or settings.local_broker_nodes
        problem = port_problem(settings.broker_port, settings.controller_port, self.node_count)
        if problem:
            raise BrokerError(problem)
        self.nodes = cluster_nodes(settings, self.node_count)
        self.address = ",".join(node.address for node in self.nodes)

    # -- queries -------------------------------------------------------------
    def status(self) -> ClusterStatus:
        return ClusterStatus(tuple(self.node_status(node.node_id) for node in self.nodes))

    def node_status(self, node_id: int) -> BrokerStatus:
        node = self.node(node_id)
        pid = _live_pid(node)
        ready = pid is not None and port_open("127.0.0.1", node.client_port)
        return BrokerStatus(running=pid is not None, ready=ready, pid=pid, address=node.address,
                            node_id=node.node_id)

    def node(self, node_id: int) -> BrokerNode:
        """Node ``node_id`` (1..N); a BrokerError names the valid ones."""
        if not 1 <= node_id <= self.node_count:
            valid = "1" if self.node_count == 1 else f"1..{self.node_count}"
            raise BrokerError(f"there is no node {node_id}: the local broker has {self.node_count} node(s), "
                              f"numbered {valid} (node i listens on TOCK_BROKER_PORT + i-1)")
        return self.nodes[node_id - 1]

    def formatted_nodes(self) -> int | None:
        """The node count the broker's data was formatted for, or None for a fresh home."""
        remembered = remembered_broker_nodes(self.settings.home)
        if remembered is None and (self.root / "data" / "meta.properties").exists():
            return 1  # a single-node broker from before the count was remembered
        return remembered

    # -- commands ------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> ClusterStatus:
        """Start every node that does not run; return once all accept connections."""
        self._check_node_count()
        pids = {node.node_id: _live_pid(node) for node in self.nodes}
        stopped = [node for node in self.nodes if pids[node.node_id] is None]
        if stopped:
            java = self._prepare(stopped)
            # All at once: a node gets ready only when a quorum of controllers runs.
            pids.update({node.node_id: self._launch(java, node) for node in stopped})
        for node in self.nodes:
            self._wait_ready(node, pids[node.node_id], timeout)
        return self.status()

    def start_node(self, node_id: int, timeout: float = 180.0) -> BrokerStatus:
        """Start one node of an existing broker (the others' quorum must be up for it to get ready)."""
        node = self.node(node_id)
        if self.formatted_nodes() is None:
            raise BrokerError(f"no local broker under {self.root} yet: start it whole first "
                              f"(tock broker start --nodes {self.node_count})")
        self._check_node_count()
        pid = _live_pid(node)
        if pid is None:
            pid = self._launch(self._prepare([node]), node)
        return self._wait_ready(node, pid, timeout)

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop every node (controlled shutdown, all at once). Returns False if none was running."""
        return self._stop_nodes(self.nodes, timeout)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> bool:
        """Stop one node. Returns False if it was not running."""
        return self._stop_nodes([self.node(node_id)], timeout)

    def fetch_jars(self) -> Path:
        libs = self.settings.kafka_libs
        result = subprocess.run(["bash", str(FETCH_SCRIPT), str(libs)], capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"could not fetch the Kafka jars into {libs}:\n{result.stderr.strip()}")
        return libs

    # -- internals -----------------------------------------------------------
    def _check_node_count(self) -> None:
        formatted = self.formatted_nodes()
        if formatted is not None and formatted != self.node_count:
            raise BrokerError(
                f"the local broker under {self.root} was made with {formatted} node(s), not {self.node_count}; "
                f"start it without --nodes (and without TOCK_BROKER_NODES), or stop it and delete {self.root} "
                f"to make a new {self.node_count}-node broker (its data is then lost), or use another TOCK_HOME")

    def _stop_nodes(self, nodes: list[BrokerNode], timeout: float) -> bool:
        pids = {node.node_id: _live_pid(node) for node in nodes}
        for pid in filter(None, pids.values()):
            os.kill(pid, signal.SIGTERM)
        for node in nodes:
            pid = pids[node.node_id]
            if pid is not None and not wait_for_exit(pid, timeout):
                os.kill(pid, signal.SIGKILL)
                wait_for_exit(pid, 10)
            node.pid_file.unlink(missing_ok=True)
        return any(pids.values())

    def _prepare(self, nodes: list[BrokerNode]) -> str:
        """Check ports, fetch jars, write configs and format the nodes' storage; returns java."""
        for node in nodes:
            if port_open("127.0.0.1", node.client_port):
                raise BrokerError(
                    f"port {node.client_port} (node {node.node_id}) is taken by a process that is not Tock's "
                    "broker; stop it or set TOCK_BROKER_PORT / TOCK_KAFKA_BOOTSTRAP")
        java = require_java()
        self.fetch_jars()
        for node in nodes:
            self._write_config(node)
            self._format_storage(java, node)
        (self.root / "nodes").write_text(f"{self.node_count}\n")
        return java

    def _write_config(self, node: BrokerNode) -> None:
        for folder in (node.data_dir, node.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
        node.config_file.write_text(server_properties(self.settings, node, self.nodes))
        (node.root / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def _format_storage(self, java: str, node: BrokerNode) -> None:
        if (node.data_dir / "meta.properties").exists():
            return
        id_file = self.root / "cluster-id"
        if not id_file.exists():
            id_file.write_text(kafka_cluster_id() + "\n")
        # One node: a dynamic quorum of itself (--standalone). Several: the static voters of
        # server.properties, so no quorum flag (StorageTool refuses one beside static voters).
        quorum = ["--standalone"] if self.node_count == 1 else []
        command = [java, "-Xmx256M", *self._jvm_common(node), "kafka.tools.StorageTool", "format",
                   *quorum, "-g", "-t", id_file.read_text().strip(), "-c", str(node.config_file)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"formatting {node.data_dir} failed:\n{result.stdout}{result.stderr}")

    def _launch(self, java: str, node: BrokerNode) -> int:
        heap = self.settings.broker_heap
        command = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-Djava.awt.headless=true", *self._jvm_common(node), "kafka.Kafka", str(node.config_file)]
        with open(node.logs_dir / "stdout.log", "ab") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        node.pid_file.write_text(str(process.pid))
        return process.pid

    def _jvm_common(self, node: BrokerNode) -> list[str]:
        return [f"-Dkafka.logs.dir={node.logs_dir}",
                f"-Dlog4j2.configurationFile={node.root / 'log4j2.properties'}",
                "-cp", f"{self.settings.kafka_libs}/*"]

    def _wait_ready(self, node: BrokerNode, pid: int | None, timeout: float) -> BrokerStatus:
        # The client port opens once the node is registered and unfenced by the controller quorum.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pid is None or not pid_alive(pid):
                raise BrokerError(f"broker node {node.node_id} exited during start-up; see "
                                  f"{node.logs_dir / 'server.log'} and {node.logs_dir / 'stdout.log'}")
            if port_open("127.0.0.1", node.client_port):
                return self.node_status(node.node_id)
            time.sleep(0.1)
        raise BrokerError(f"broker node {node.node_id} did not accept connections within {timeout:.0f} s; "
                          f"see {node.logs_dir / 'server.log'}")


def _live_pid(node: BrokerNode) -> int | None:
    try:
        pid = int(node.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) and _is_kafka(pid, node.config_file) else None


def kafka_cluster_id() -> str:
    """A cluster id in Kafka's format: 16 random bytes, URL-safe base64 without padding.

    Never starting with "-", as Kafka's own Uuid.randomUuid: StorageTool's ``-t -abc...`` would
    read the id as an option ("argument --cluster-id/-t: expected one argument"; 1 in 64 ids)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def require_java(minimum: int = 17) -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError(f"java not found: the local Kafka broker needs Java {minimum}+ "
                          "(apt-get install openjdk-17-jre-headless)")
    output = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < minimum:
        raise BrokerError(f"Java {minimum}+ is required for the Kafka 4 broker; found: {output.splitlines()[0]}")
    return java


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_start_time(pid) is not None  # a zombie has ended (infra/procfs.py)


def wait_for_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def _is_kafka(pid: int, config_file: Path) -> bool:
    """Whether ``pid`` is the Kafka broker of that server.properties (not a recycled pid)."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # Compared resolved: a broker started under another spelling of the same home is still ours.
    configs = [Path(os.fsdecode(argument)).resolve() for argument in arguments if argument.endswith(b".properties")]
    return b"kafka.Kafka" in arguments and config_file.resolve() in configs
