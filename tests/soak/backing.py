"""The soak's own backing services, private so that restarting them disturbs no other test: a Kafka
broker (`tock broker`, under the soak's TOCK_HOME and free ports), a PostgreSQL cluster
(infra/scripts/postgres.sh on a free port and state folder), a Redis (tests/scenarios/celery_support's
PrivateRedis) and a kube-apiserver + etcd (`tock kube`, its own home and ports). Each one is
restarted through its own commands; every start waits until the service answers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from infra.settings import Settings, load_settings
from tests.scenarios.celery_support import PrivateRedis
from tests.scenarios.scheduler_support import REPO, environment, free_port, wait_until

SCRIPTS = REPO / "infra" / "scripts"
HEARTBEAT_SECONDS = 1.0
HEARTBEAT_TIMEOUT = 20.0
SESSION_TIMEOUT = 6.0  # the schedulers' and the monitor's group session timeout


class BackingError(RuntimeError):
    """A backing service did not start or stop; the message carries its command's output."""


def _free_pair(*taken: int) -> int:
    """A free port whose successor is free too (etcd's peer port)."""
    while True:
        port = free_port(*taken)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        if port + 1 not in taken:
            return port


def soak_settings(root: Path, postgres_port: int, redis: PrivateRedis) -> Settings:
    """The soak's settings: a private home, broker, database, Redis and control plane; every executor."""
    home = root / "home"
    broker = free_port()
    controller = free_port(broker)
    etcd = _free_pair(broker, controller)
    taken = (broker, controller, etcd, etcd + 1, postgres_port, redis.port)
    apiserver = free_port(*taken)
    api = free_port(*taken, apiserver)
    return load_settings({
        "TOCK_HOME": str(home), "TOCK_BROKER_PORT": str(broker), "TOCK_CONTROLLER_PORT": str(controller),
        "TOCK_BROKER_HEAP": "384M", "TOCK_TOPIC_PREFIX": "soak.", "TOCK_PARTITIONS": "4",
        "TOCK_DB_URL": f"postgresql+psycopg://tock@127.0.0.1:{postgres_port}/tock",
        "TOCK_CELERY_BROKER_URL": redis.url, "TOCK_EXECUTORS": "local,celery,kubernetes",
        "TOCK_KUBE_APISERVER_PORT": str(apiserver), "TOCK_KUBE_ETCD_PORT": str(etcd),
        "TOCK_KUBECONFIG": str(home / "kube" / "kubeconfig"),
        "TOCK_API_PORT": str(api), "TOCK_MONITOR_PORT": str(free_port(*taken, apiserver, api)),
        "TOCK_API_TOKEN": uuid.uuid4().hex,
        "TOCK_DAGS_FOLDER": str(root / "dags"),
        "TOCK_TASK_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS), "TOCK_TASK_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "TOCK_TASK_START_TIMEOUT": "90", "TOCK_SCHEDULER_SESSION_TIMEOUT": f"{SESSION_TIMEOUT:g}",
        "TOCK_MONITOR_SESSION_TIMEOUT": f"{SESSION_TIMEOUT:g}",
        "TOCK_SCHEDULER_SNAPSHOT_INTERVAL_SECONDS": "30", "TOCK_WARM_RUNNERS": "2", "TOCK_PARSE_PARALLELISM": "1",
    })


def tock(settings: Settings, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """Run a `tock` command with the soak's settings; its exit code and output are the caller's to judge."""
    try:
        return subprocess.run([sys.executable, "-m", "tock_cli", *args], env=environment(settings), cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(expired.cmd, 124, _text(expired.stdout), _text(expired.stderr) +
                                           f"\n(timed out after {timeout:g} s)")


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def _must(result: subprocess.CompletedProcess, what: str) -> str:
    if result.returncode != 0:
        raise BackingError(f"{what} failed (exit {result.returncode}):\n{result.stdout[-2000:]}\n"
                           f"{result.stderr[-2000:]}")
    return result.stdout


class PrivatePostgres:
    """A PostgreSQL cluster of the soak's own (postgres.sh with PG_PORT / PG_STATE_DIR)."""

    def __init__(self) -> None:
        self.port = free_port()
        # The postgres user must reach the state folder; a checkout under /root would not do.
        self.state = Path(f"/var/tmp/tock-soak-postgres-{self.port}")
        self.environment = {**os.environ, "PG_PORT": str(self.port), "PG_STATE_DIR": str(self.state)}

    def _script(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPTS / "postgres.sh"), command], env=self.environment,
                              capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        _must(self._script("start"), "postgres.sh start")

    def stop(self) -> None:
        _must(self._script("stop"), "postgres.sh stop")

    def remove(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)


class Backing:
    """The four private backing services; ``restart(kind)`` takes one down and brings it back."""

    KINDS = ("broker", "postgres", "redis", "kube-apiserver")

    def __init__(self, root: Path) -> None:
        self.postgres = PrivatePostgres()
        self.redis = PrivateRedis(root / "redis")
        self.settings = soak_settings(root, self.postgres.port, self.redis)

    def start_all(self) -> None:
        self.postgres.start()
        self.redis.start()
        self.start_broker()
        _must(tock(self.settings, "topics", "create"), "tock topics create")
        self.start_kube()

    def start_broker(self) -> None:
        # As long as it takes: on a machine loaded past its cores a broker once took more than 180 s.
        _must(tock(self.settings, "broker", "start", "--timeout", "600", timeout=660), "tock broker start")

    def start_kube(self) -> None:
        _must(tock(self.settings, "kube", "start", "--no-agent"), "tock kube start --no-agent")

    def stop(self, kind: str) -> None:
        """Take one backing service down: a clean stop, except the kube-apiserver (kill -9)."""
        match kind:
            case "broker":
                _must(tock(self.settings, "broker", "stop"), "tock broker stop")
            case "postgres":
                self.postgres.stop()
            case "redis":
                self.redis.stop()
            case "kube-apiserver":
                os.kill(self.apiserver_pid(), signal.SIGKILL)
                wait_until(lambda: self.apiserver_pid(required=False) is None, 30, "the kube-apiserver to die")
            case _:
                raise ValueError(f"no backing service {kind!r}")

    def start(self, kind: str) -> None:
        """Bring one backing service back; returns once it answers."""
        match kind:
            case "broker":
                self.start_broker()
            case "postgres":
                self.postgres.start()
            case "redis":
                self.redis.start()
            case "kube-apiserver":
                self.start_kube()
            case _:
                raise ValueError(f"no backing service {kind!r}")

    def apiserver_pid(self, required: bool = True) -> int | None:
        """The kube-apiserver's pid, as `tock kube status` tells it."""
        output = tock(self.settings, "kube", "status", timeout=60).stdout
        found = re.search(r"kube-apiserver pid (\d+)", output)
        if found is None and required:
            raise BackingError(f"`tock kube status` names no kube-apiserver pid: {output}")
        return int(found.group(1)) if found else None

    def stop_all(self) -> list[str]:
        """Stop everything that may still run (after the soak, or when it failed); returns the problems."""
        problems = []
        steps = [("kube", lambda: _must(tock(self.settings, "kube", "stop"), "tock kube stop")),
                 ("broker", lambda: _must(tock(self.settings, "broker", "stop"), "tock broker stop")),
                 ("redis", lambda: self.redis.stop() if self.redis.running() else None),
                 ("postgres", self.postgres.stop)]
        for name, step in steps:
            try:
                step()
            except (BackingError, subprocess.SubprocessError, AssertionError, OSError) as error:
                problems.append(f"stopping {name}: {error}")
        self.postgres.remove()
        return problems
