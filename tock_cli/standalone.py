"""``tock standalone``: the broker, the topics and every service as child processes, stopped together."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from infra.broker import BrokerError, LocalKafkaBroker
from infra.log import DeliveryFailed
from infra.redis import RedisError, ensure_local_redis, is_local
from infra.settings import Settings
from infra.topics import ensure_topics

log = logging.getLogger("tock.standalone")

SERVICES = ("dag-processor", "scheduler", "projector", "api", "worker", "monitor", "asset-watcher")
# Services with a metrics port of their own, in the order of TOCK_STANDALONE_METRICS_PORT + 0, 1, 2.
METRICS_PORTS = {"scheduler": "scheduler_metrics_port", "dag-processor": "dag_processor_metrics_port",
                 "projector": "projector_metrics_port"}
STOP_GRACE = 20.0


class StandaloneError(RuntimeError):
    """Standalone could not start; the message says why."""


class Standalone:
    """Starts the services (those among ``available`` commands) and supervises them."""

    def __init__(self, settings: Settings, dags_folder: Path, available: set[str]) -> None:
        self.settings = settings
        self.dags_folder = dags_folder
        self.services = [name for name in SERVICES if name in available
                         and (name != "worker" or "celery" in settings.available_executors)]
        self.children: dict[str, subprocess.Popen] = {}
        self._stopping = False
        self._admin: str | None = None

    def run(self) -> int:
        """Run until Ctrl-C / SIGTERM (exit 0) or until a service dies (exit 1)."""
        self._prepare()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        ports = self._metrics_ports()
        environment = {**os.environ, "TOCK_DAGS_FOLDER": str(self.dags_folder),
                       **{f"TOCK_{field.upper()}": str(ports.get(name, 0)) for name, field in METRICS_PORTS.items()}}
        for name in self.services:
            self.children[name] = subprocess.Popen([sys.executable, "-m", "tock_cli", name], env=environment,
                                                   start_new_session=True)
            log.info("started %s (pid %d)", name, self.children[name].pid)
        log.info("standalone running on %s with DAGs from %s; Ctrl-C stops it", self.settings.bootstrap,
                 self.dags_folder)
        self._log_metrics(ports)
        if self._admin is not None:
            print(self._admin, flush=True)
        code = self._supervise()
        self._stop_children()
        return code

    def _prepare(self) -> None:
        if not self.dags_folder.is_dir():
            raise StandaloneError(f"the DAGs folder {self.dags_folder} does not exist")
        if self.settings.uses_local_broker:
            try:
                status = LocalKafkaBroker(self.settings).start()
            except BrokerError as error:
                raise StandaloneError(str(error)) from None
            log.info("local broker: %s", status.describe())
        if "worker" in self.services and is_local(self.settings):
            try:
                log.info("local Redis (Celery broker): %s", ensure_local_redis(self.settings))
            except RedisError as error:
                raise StandaloneError(str(error)) from None
        created = ensure_topics(AdminClient({"bootstrap.servers": self.settings.bootstrap}),
                                self.settings.topic_prefix, self.settings.partitions,
                                log_retention_hours=self.settings.task_log_retention_hours)
        if created:
            log.info("created topics %s", ", ".join(created))
        self._fernet_key()
        self._admin = self._admin_banner()

    def _fernet_key(self) -> None:
        """A key for the store of variables and connections, written to the home once (unless set)."""
        from infra.secrets.keys import ensure_key_file

        written = ensure_key_file(self.settings)
        if written is not None:
            log.info("generated the Fernet key of variables and connections in %s (keep it: the store's values "
                     "need it; TOCK_FERNET_KEY overrides it)", written)

    def _admin_banner(self) -> str | None:
        """The UI's address and the admin's login; the account is made on the first start."""
        if "api" not in self.services:
            return None
        from services.api import standalone_admin  # only when the API is installed and started

        try:
            return standalone_admin.banner(self.settings, standalone_admin.ensure_admin(self.settings))
        except DeliveryFailed as error:
            raise StandaloneError(f"could not create the admin account: {error}") from None

    def _metrics_ports(self) -> dict[str, int]:
        """The services' metrics ports, less those taken (e.g. by another standalone): a metrics
        port is no reason for a laptop's scheduler not to start."""
        ports = {}
        for name, port in metrics_ports(self.settings, self.services).items():
            if _bindable(self.settings.metrics_host, port):
                ports[name] = port
            else:
                log.warning("port %d is taken: %s metrics off (set TOCK_STANDALONE_METRICS_PORT or "
                            "TOCK_%s)", port, name, METRICS_PORTS[name].upper())
        return ports

    def _log_metrics(self, ports: dict[str, int]) -> None:
        host = self.settings.metrics_host
        for name, port in ports.items():
            log.info("%s metrics: http://%s:%d/metrics", name, host, port)
        if "api" in self.services:
            log.info("api metrics: http://%s:%d/metrics (a viewer's login or token)", self.settings.api_host,
                     self.settings.api_port)

    def _supervise(self) -> int:
        while not self._stopping:
            for name, child in self.children.items():
                if child.poll() is not None:
                    log.error("%s exited with code %s; stopping everything", name, child.returncode)
                    return 1
            time.sleep(0.2)
        return 0

    def _on_signal(self, signum: int, _frame) -> None:
        log.info("%s received: stopping the services", signal.Signals(signum).name)
        self._stopping = True

    def _stop_children(self) -> None:
        # Stop in reverse order of start: the scheduler before the DAG processor it depends on.
        for child in reversed(self.children.values()):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for name, child in self.children.items():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s: killing it", name, STOP_GRACE)
                child.kill()
                child.wait()
            log.info("%s stopped (exit code %s)", name, child.returncode)


def metrics_ports(settings: Settings, services: list[str]) -> dict[str, int]:
    """The metrics port of each started service that has one: its own setting when set, else
    TOCK_STANDALONE_METRICS_PORT plus its place in METRICS_PORTS (none when that is 0)."""
    ports = {}
    for offset, (name, field) in enumerate(METRICS_PORTS.items()):
        own = getattr(settings, field)
        port = own or (settings.standalone_metrics_port + offset if settings.standalone_metrics_port else 0)
        if name in services and port:
            ports[name] = port
    return ports


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
