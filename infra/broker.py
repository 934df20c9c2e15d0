"""The local development broker: a single-node Apache Kafka (KRaft, combined mode).

Its jars come from Maven Central (``infra/scripts/fetch-kafka.sh``); its data lives
under ``<TOCK_HOME>/broker`` and survives stop/start. It listens on 127.0.0.1 only.
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

from infra.settings import Settings

FETCH_SCRIPT = Path(__file__).parent / "scripts" / "fetch-kafka.sh"


class BrokerError(RuntimeError):
    """The local broker cannot be set up, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    ready: bool
    pid: int | None
    address: str

    def describe(self) -> str:
        if self.ready:
            return f"running (pid {self.pid}), ready at {self.address}"
        if self.running:
            return f"starting (pid {self.pid}), not yet accepting connections at {self.address}"
        return "stopped"


class LocalKafkaBroker:
    """Starts, stops and inspects the local broker described by the settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.home / "broker"
        self.data_dir = self.root / "data"
        self.logs_dir = self.root / "logs"
        self.pid_file = self.root / "broker.pid"
        self.address = f"127.0.0.1:{settings.broker_port}"

    # -- queries -------------------------------------------------------------
    def status(self) -> BrokerStatus:
        pid = self._live_pid()
        ready = pid is not None and port_open("127.0.0.1", self.settings.broker_port)
        return BrokerStatus(running=pid is not None, ready=ready, pid=pid, address=self.address)

    # -- commands ------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> BrokerStatus:
        """Start the broker unless it runs; return once it accepts connections."""
        current = self.status()
        if current.running:
            return self._wait_ready(current.pid, timeout)
        if port_open("127.0.0.1", self.settings.broker_port):
            raise BrokerError(
                f"port {self.settings.broker_port} is taken by a process that is not Tock's broker; "
                "stop it or set TOCK_BROKER_PORT / TOCK_KAFKA_BOOTSTRAP"
            )
        java = require_java()
        self.fetch_jars()
        self._write_config()
        self._format_storage(java)
        pid = self._launch(java)
        return self._wait_ready(pid, timeout)

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the broker (controlled shutdown). Returns False if it was not running."""
        pid = self._live_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        if not wait_for_exit(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            wait_for_exit(pid, 10)
        self.pid_file.unlink(missing_ok=True)
        return True

    def fetch_jars(self) -> Path:
        libs = self.settings.kafka_libs
        result = subprocess.run(["bash", str(FETCH_SCRIPT), str(libs)], capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"could not fetch the Kafka jars into {libs}:\n{result.stderr.strip()}")
        return libs

    # -- internals -----------------------------------------------------------
    def _write_config(self) -> None:
        for folder in (self.data_dir, self.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
        (self.root / "server.properties").write_text(server_properties(self.settings, self.data_dir))
        (self.root / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def _format_storage(self, java: str) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        id_file = self.root / "cluster-id"
        if not id_file.exists():
            id_file.write_text(kafka_cluster_id() + "\n")
        command = [java, "-Xmx256M", *self._jvm_common(), "kafka.tools.StorageTool", "format",
                   "--standalone", "-g", "-t", id_file.read_text().strip(),
                   "-c", str(self.root / "server.properties")]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"formatting {self.data_dir} failed:\n{result.stdout}{result.stderr}")

    def _launch(self, java: str) -> int:
        heap = self.settings.broker_heap
        command = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-Djava.awt.headless=true", *self._jvm_common(), "kafka.Kafka",
                   str(self.root / "server.properties")]
        with open(self.logs_dir / "stdout.log", "ab") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid_file.write_text(str(process.pid))
        return process.pid

    def _jvm_common(self) -> list[str]:
        return [f"-Dkafka.logs.dir={self.logs_dir}",
                f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
                "-cp", f"{self.settings.kafka_libs}/*"]

    def _wait_ready(self, pid: int | None, timeout: float) -> BrokerStatus:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pid is None or not pid_alive(pid):
                raise BrokerError(f"the broker exited during start-up; see {self.logs_dir / 'server.log'}"
                                  f" and {self.logs_dir / 'stdout.log'}")
            if port_open("127.0.0.1", self.settings.broker_port):
                return self.status()
            time.sleep(0.1)
        raise BrokerError(f"the broker did not accept connections within {timeout:.0f} s; "
                          f"see {self.logs_dir / 'server.log'}")

    def _live_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) and _is_kafka(pid) else None


def server_properties(settings: Settings, data_dir: Path) -> str:
    client, controller = settings.broker_port, settings.controller_port
    lines = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": str(settings.partitions),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "log.retention.hours": "-1",
        "delete.topic.enable": "true",
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""


def kafka_cluster_id() -> str:
    """A cluster id in Kafka's format: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


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
    return not _is_zombie(pid)


def wait_for_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _is_kafka(pid: int) -> bool:
    try:
        return b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
