"""The agent's pods as local process trees: start, find again, sample, signal, release.

Each pod's first container runs as ``shim -> command`` in a session of its own (process
group = the shim's pid), enrolled in the agent's group watcher: a killed agent takes its
pods with it, a cleanly stopped one releases them. Only the first container runs; init
containers, probes, volumes and images are not supported (the image is a label here).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from infra.group_watcher import GroupWatcher
from infra.procfs import process_start_time
from services.node_agent.core import events as ev
from services.node_agent.core.model import Container, PodView
from services.node_agent.paths import AgentPaths, read_json, write_json

log = logging.getLogger("tock.node_agent")

# By path, isolated (-I -S): the shim needs only the standard library, whatever the pod's env and cwd.
SHIM = str(Path(__file__).with_name("shim.py"))
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


@dataclass(frozen=True)
class Tracked:
    pid: int
    start_ticks: int | None
    child: subprocess.Popen | None  # None: found again after a restart, not our child


def pod_environment(pod: PodView, base: Mapping[str, str], node: str, pod_home: Path) -> dict[str, str]:
    """The agent's environment without TOCK_*, this interpreter's directory first on PATH,
    TOCK_HOSTNAME and TOCK_HOME, then the pod's own ``value`` entries (they win)."""
    env = {key: value for key, value in base.items() if not key.startswith("TOCK_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env |= {"TOCK_HOSTNAME": node, "TOCK_HOME": str(pod_home)}
    return env | dict(pod.container.env)


class ProcessTable:
    """The process trees of this node's pods, by pod name."""

    def __init__(self, paths: AgentPaths, node: str, watcher: GroupWatcher, base_env: Mapping[str, str]) -> None:
        self._paths, self._node, self._watcher, self._base_env = paths, node, watcher, base_env
        self._tracked: dict[str, Tracked] = {}

    def start(self, pod: PodView, now: str) -> ev.ContainerStarted:
        """Run the pod's command under the shim, record it, enroll its group."""
        name, pod_home = pod.name, self._paths.pod_dir(pod.name)
        pod_home.mkdir(parents=True, exist_ok=True)
        self._paths.log_file(name).parent.mkdir(parents=True, exist_ok=True)
        self._paths.exit_file(name).unlink(missing_ok=True)
        self._paths.record(name).parent.mkdir(parents=True, exist_ok=True)
        shim = [sys.executable, "-I", "-S", SHIM, str(self._paths.exit_file(name)), "--", *pod.container.command]
        with open(self._paths.log_file(name), "ab") as output:
            child = subprocess.Popen(shim, cwd=pod_home, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                     env=pod_environment(pod, self._base_env, self._node, pod_home),
                                     start_new_session=True)
        self._watcher.adopt(child.pid)
        self._tracked[name] = Tracked(child.pid, process_start_time(child.pid), child)
        container = Container(uid=pod.uid, pid=child.pid, started_at=now)
        self._save(name, container)
        log.info("pod %s: started %s (pid %d)", name, " ".join(pod.container.command), child.pid)
        return ev.ContainerStarted(name, container)

    def find_again(self) -> list[ev.Event]:
        """At start-up: the containers recorded by a former run, alive (enrolled again) or ended."""
        found: list[ev.Event] = []
        for name in self._paths.recorded_pods():
            record = read_json(self._paths.record(name))
            if record is None:
                continue
            container = Container(uid=record["uid"], pid=record["pid"], started_at=record["started_at"],
                                  kill_reason=record.get("kill_reason"))
            found.append(ev.ContainerStarted(name, container))
            if process_start_time(container.pid) == record.get("start_ticks"):
                self._watcher.adopt(container.pid)
                self._tracked[name] = Tracked(container.pid, record.get("start_ticks"), None)
                log.info("pod %s: found its process again (pid %d)", name, container.pid)
            else:
                found.append(ev.ContainerExited(name, self._exit_code(name, None)))
        return found

    def poll(self) -> list[ev.Event]:
        """Exits and memory samples of every tracked container."""
        events: list[ev.Event] = []
        for name, tracked in list(self._tracked.items()):
            if _alive(tracked):
                events.append(ev.MemorySampled(name, tree_rss(tracked.pid)))
                continue
            del self._tracked[name]
            self._watcher.release(tracked.pid)
            events.append(ev.ContainerExited(name, self._exit_code(name, tracked.child)))
        return events

    def signal(self, name: str, signal_name: str, reason: str | None, at: float) -> ev.SignalSent:
        tracked = self._tracked.get(name)
        if reason:  # recorded first: an agent restarted right after still knows why it died
            record = read_json(self._paths.record(name)) or {}
            write_json(self._paths.record(name), record | {"kill_reason": reason})
        if tracked is not None:
            _kill_group(tracked.pid, SIGNALS[signal_name])
        log.info("pod %s: SIG%s%s", name, signal_name, f" ({reason})" if reason else "")
        return ev.SignalSent(name, signal_name, at, reason)

    def forget(self, name: str) -> ev.ContainerForgotten:
        """The pod is gone: drop the record (the log and working directory stay)."""
        self._paths.record(name).unlink(missing_ok=True)
        self._paths.exit_file(name).unlink(missing_ok=True)
        return ev.ContainerForgotten(name)

    def release_all(self) -> None:
        """A clean stop: every running pod outlives the agent."""
        for tracked in self._tracked.values():
            self._watcher.release(tracked.pid)

    def _save(self, name: str, container: Container) -> None:
        write_json(self._paths.record(name), {"uid": container.uid, "pid": container.pid,
                                              "start_ticks": self._tracked[name].start_ticks,
                                              "started_at": container.started_at})

    def _exit_code(self, name: str, child: subprocess.Popen | None) -> int | None:
        written = read_json(self._paths.exit_file(name))
        if written is not None:
            return int(written["exit_code"])
        if child is not None and child.returncode is not None:  # the shim itself was killed
            return 128 - child.returncode if child.returncode < 0 else child.returncode
        return None


def _alive(tracked: Tracked) -> bool:
    if tracked.child is not None:
        return tracked.child.poll() is None
    return process_start_time(tracked.pid) == tracked.start_ticks


def tree_rss(pid: int) -> int:
    """Resident bytes of the shim's descendants (the pod's processes; the shim itself not counted)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for child in children:
        try:
            total += child.memory_info().rss
        except psutil.Error:  # ended meanwhile
            pass
    return total


def _kill_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass

