"""The Tock processes of the soak, started as real processes through `tock ...` (the scenario
helpers' Processes, Workers and Agents), by kind: what the fault injector may kill or freeze, and
how each one is brought back.

Runners are not started here (the executors start them): the ones running a try are found from
the log (TaskStarted names the runner's pid) and only touched when their TOCK_HOME lies under the
soak's root, so no process of another test is ever signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from infra.settings import Settings
from tests.scenarios.celery_support import Workers
from tests.scenarios.kube_support import Agents
from tests.scenarios.scheduler_support import Processes
from tests.soak.checks import Exit

SCHEDULERS = ("s1", "s2")
WORKERS = ("host-a", "host-b")
NODES = ("node-a", "node-b")
SINGLE = ("dag-processor", "projector", "api", "monitor")
KINDS = ("scheduler", "runner", "celery-worker", "node-agent", *SINGLE)


def kind_of(name: str) -> str:
    """The kind of a target name ("s1" -> "scheduler", "host-a" -> "celery-worker", ...)."""
    if name.startswith("runner:"):
        return "runner"
    return {**dict.fromkeys(SCHEDULERS, "scheduler"), **dict.fromkeys(WORKERS, "celery-worker"),
            **dict.fromkeys(NODES, "node-agent")}.get(name, name)


@dataclass
class Fleet:
    """Every Tock service of the soak, with ``kill``, ``freeze`` / ``thaw`` and ``restart`` by target."""

    settings: Settings
    root: Path
    busy_runners: Callable[[], dict[int, str]]  # runners holding a try (from the log): pid -> executor
    processes: Processes = field(init=False)
    workers: Workers = field(init=False)
    agents: Agents = field(init=False)
    services: dict[str, subprocess.Popen] = field(default_factory=dict, init=False)
    frozen: dict[int, str] = field(default_factory=dict, init=False)  # pid -> the target it was frozen as
    exits: list[Exit] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)  # thaws come from timer threads

    def __post_init__(self) -> None:
        self.processes = Processes(self.settings, self.root / "logs")
        self.workers = Workers(self.settings, self.root / "hosts")
        self.agents = Agents(self.settings, self.root / "nodes")

    # -- start -----------------------------------------------------------------------------
    def start_all(self) -> None:
        for name in (*SINGLE, *SCHEDULERS):
            self.restart(name)
        for name in (*WORKERS, *NODES):
            self.restart(name)

    def restart(self, name: str) -> None:
        """(Re)start the service ``name``; workers and agents return once ready."""
        if name in SCHEDULERS:
            self.services[name] = self.processes.scheduler(name)
        elif name in WORKERS:
            self.services[name] = self.workers.start(name, concurrency=2)
        elif name in NODES:
            self.services[name] = self.agents.start(name)
        elif name == "monitor":
            self.services[name] = self.processes.start("monitor", "--id", "m1", name="monitor")
        else:
            self.services[name] = self.processes.start(name, name=name)

    # -- targets ---------------------------------------------------------------------------
    def targets(self, kind: str) -> list[str]:
        """Names of the live targets of a kind that are not frozen now ("runner:<executor>:<pid>" for
        runners)."""
        with self._lock:
            frozen = set(self.frozen.values()) | {f"runner:{pid}" for pid in self.frozen}
        if kind == "runner":
            return [f"runner:{executor}:{pid}" for pid, executor in sorted(self.busy_runners().items())
                    if self._ours(pid) and f"runner:{pid}" not in frozen]
        names = {"scheduler": SCHEDULERS, "celery-worker": WORKERS, "node-agent": NODES}.get(kind, (kind,))
        return [name for name in names
                if name in self.services and self.services[name].poll() is None and name not in frozen]

    def _ours(self, pid: int) -> bool:
        try:
            process = psutil.Process(pid)
            return (process.status() != psutil.STATUS_ZOMBIE
                    and process.environ().get("TOCK_HOME", "").startswith(str(self.root)))
        except psutil.Error:
            return False

    def pids_of(self, name: str) -> list[int]:
        """The pids a fault on ``name`` signals: a Celery worker's whole group (its host), else one."""
        if name.startswith("runner:"):
            return [int(name.rsplit(":", 1)[1])]
        process = self.services[name]
        if name in WORKERS:
            return [child.pid for child in _group(process.pid)] or [process.pid]
        return [process.pid]

    # -- faults ----------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """kill -9 of the target (a worker: its whole process group, a lost host), then restart it."""
        if name in WORKERS:
            os.killpg(self.services[name].pid, signal.SIGKILL)
        else:
            for pid in self.pids_of(name):
                _signal(pid, signal.SIGKILL)
        if name.startswith("runner:"):
            return
        self.services[name].wait(30)
        self.restart(name)

    def freeze(self, name: str, with_children: bool = False) -> list[int]:
        """SIGSTOP of the target (``with_children``: and every process under it, e.g. a runner's user
        code, as a paused host would be); returns the pids stopped, parents first."""
        pids = self.pids_of(name)
        if with_children:
            pids += [child.pid for pid in list(pids) for child in _children(pid)]
        with self._lock:
            for pid in pids:
                _signal(pid, signal.SIGSTOP)
                self.frozen[pid] = name
        return pids

    def thaw(self, pids: list[int]) -> None:
        """SIGCONT, children first (pids as ``freeze`` returned them)."""
        with self._lock:
            for pid in reversed(pids):
                _signal(pid, signal.SIGCONT)
                self.frozen.pop(pid, None)

    def thaw_all(self) -> None:
        with self._lock:
            pids = sorted(self.frozen)
        self.thaw(pids)

    def revive(self) -> list[str]:
        """Restart every service that ended on its own; remembers each exit. Returns their names."""
        ended = [name for name, process in self.services.items() if process.poll() is not None]
        for name in ended:
            self.exits.append(Exit(name, kind_of(name), self.services[name].returncode, time.time(),
                                   self._log_tail(name)))
            self.restart(name)
        return ended

    def _log_tail(self, name: str) -> str:
        if name in WORKERS:
            text = self.workers.log_of(name)
        elif name in NODES:
            text = self.agents.log_of(name)
        else:
            text = self.processes.log_of(f"scheduler-{name}" if name in SCHEDULERS else name)
        return "\n".join(text.splitlines()[-12:])

    # -- stop ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every service (SIGTERM, then kill), then every runner left under the soak's root."""
        self.thaw_all()
        self.processes.close()
        self.workers.close()
        self.agents.close()
        self.stop_leftovers()

    def stop_leftovers(self) -> list[int]:
        """kill -9 of every Python process whose TOCK_HOME lies under the soak's root (runners outlive
        schedulers and agents on purpose; the broker's JVM and the control plane's Go binaries have
        that TOCK_HOME too, and are stopped by their own commands); returns their pids."""
        mine = [process for process in psutil.process_iter() if process.pid != os.getpid()
                and _is_python(process) and self._ours(process.pid)]
        for process in mine:
            _signal(process.pid, signal.SIGKILL)
        psutil.wait_procs(mine, timeout=10)
        return [process.pid for process in mine]


def _is_python(process: psutil.Process) -> bool:
    try:
        return process.name().startswith("python")
    except psutil.Error:
        return False


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _group(pid: int) -> list[psutil.Process]:
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return []
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == group:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
