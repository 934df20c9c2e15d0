"""Helpers for the Celery scenarios: real `tock worker` processes standing for hosts (each its own
TOCK_HOME and host name, leading its own process group so it can be killed whole), and a private
Redis that a test may stop and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from infra.settings import Settings
from tests.scenarios.scheduler_support import REPO, environment, free_port, wait_until

SCRIPTS = REPO / "infra" / "scripts"


def host_settings(settings: Settings, root: Path, host: str, **changes) -> Settings:
    """The settings of a simulated host: its own home and host name, the same log and Redis."""
    return settings.model_copy(update={"home": root / host, "hostname": host, **changes})


class Workers:
    """`tock worker` processes, one per simulated host; every one left is stopped at the end."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings, self.root = settings, root
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, host: str, *, queues: str = "default", concurrency: int = 4, **changes) -> subprocess.Popen:
        settings = host_settings(self.settings, self.root, host, **changes)
        settings.home.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"worker-{host}.log", "ab") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "tock_cli", "worker", "--queues", queues, "--concurrency", str(concurrency),
                 "--hostname", host], env=environment(settings), stdout=output, stderr=subprocess.STDOUT,
                cwd=REPO, start_new_session=True)
        self.started[host] = process
        wait_until(lambda: "ready." in self.log_of(host) or process.poll() is not None, 60, f"worker {host} ready")
        assert process.poll() is None, f"worker {host} exited: {self.log_of(host)[-2000:]}"
        return process

    def kill_group(self, host: str) -> None:
        """kill -9 of the worker's whole process group: main process, pool processes, runners."""
        os.killpg(self.started[host].pid, signal.SIGKILL)
        self.started[host].wait(10)

    def log_of(self, host: str) -> str:
        path = self.root / f"worker-{host}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


class PrivateRedis:
    """A Redis of this test's own (infra/scripts/redis.sh on a free port), to stop and restart."""

    def __init__(self, state: Path) -> None:
        self.port = free_port()
        self.environment = {**os.environ, "STATE_DIR": str(state), "REDIS_PORT": str(self.port)}

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(["bash", str(SCRIPTS / "redis.sh"), "start"], env=self.environment, check=True,
                       capture_output=True)

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPTS / "redis.sh"), "stop"], env=self.environment, check=True,
                       capture_output=True)
        wait_until(lambda: not self.running(), 30, "Redis to stop")

    def running(self) -> bool:
        result = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True)
        return "PONG" in result.stdout


def pids_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still run (zombies count as ended)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def settle_briefly(seconds: float) -> None:
    """A deliberate pause that is part of the scenario (an outage's length), not a wait for a state."""
    time.sleep(seconds)
