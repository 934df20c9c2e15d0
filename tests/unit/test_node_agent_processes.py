"""The node agent's process side without an API server: real shims, real groups, its group watcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from infra.group_watcher import GroupWatcher
from services.node_agent.core import events as ev
from services.node_agent.core.model import ContainerSpec, PodView
from services.node_agent.paths import AgentPaths
from services.node_agent.processes import ProcessTable, pod_environment


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def pod(name, *command, env=()):
    return PodView(name=name, uid=f"uid-{name}", node_name="n1", container=ContainerSpec("main", "img", command, env))


def _session_sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "300"], start_new_session=True)


def test_the_watcher_kills_adopted_groups_at_end_of_file_but_not_released_ones():
    watcher = GroupWatcher.start()
    adopted, released = _session_sleeper(), _session_sleeper()
    try:
        watcher.adopt(adopted.pid)
        watcher.adopt(released.pid)
        watcher.release(released.pid)
        watcher.close()
        assert adopted.wait(timeout=5) == -signal.SIGKILL
        assert released.poll() is None
    finally:
        for process in (adopted, released):
            process.kill()
            process.wait()


def test_the_pod_environment_drops_tock_settings_and_lets_the_pod_win(tmp_path):
    base = {"PATH": "/usr/bin", "TOCK_KAFKA_BOOTSTRAP": "x:1", "LANG": "C"}
    env = pod_environment(pod("p", "true", env=(("TOCK_HOME", "/mine"),)), base, "n1", tmp_path)
    assert env["PATH"] == f"{os.path.dirname(sys.executable)}:/usr/bin"
    assert env["TOCK_HOME"] == "/mine" and env["TOCK_HOSTNAME"] == "n1" and env["LANG"] == "C"
    assert "TOCK_KAFKA_BOOTSTRAP" not in env


def test_exit_codes_come_from_the_shim_and_a_restarted_table_finds_its_pods(tmp_path):
    paths, watcher = AgentPaths(tmp_path), GroupWatcher.start()
    table = ProcessTable(paths, "n1", watcher, {"PATH": os.environ["PATH"]})
    table.start(pod("quick", "sh", "-c", "echo out; echo err >&2; exit 3"), "t0")
    table.start(pod("slow", "sh", "-c", "sleep 1; exit 4"), "t0")
    exits = wait_for(lambda: [event for event in table.poll() if isinstance(event, ev.ContainerExited)], 10, "exit")
    assert exits == [ev.ContainerExited("quick", 3)]
    assert paths.log_file("quick").read_text() == "out\nerr\n"
    table.release_all()
    watcher.close()  # a clean stop: "slow" keeps running
    watcher = GroupWatcher.start()
    again = ProcessTable(paths, "n1", watcher, {})
    found = again.find_again()
    assert [(type(event).__name__, event.name) for event in found] == [
        ("ContainerStarted", "quick"), ("ContainerExited", "quick"), ("ContainerStarted", "slow")]
    assert found[1].exit_code == 3
    exits = wait_for(lambda: [event for event in again.poll() if isinstance(event, ev.ContainerExited)], 10, "exit")
    assert exits == [ev.ContainerExited("slow", 4)]
    watcher.close()
