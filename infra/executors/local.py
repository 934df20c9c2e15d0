"""The local executor: tries run as processes on this host, forked by a warm launcher.

It implements the executor port (infra/executors/base.py): Executor only, neither Killing nor
Watching. The warm launcher is started with the command the composition gives (tock_cli:
``services.runner.local_launcher_command()``) and is written one try message per try
(infra/executors/messages.py); it answers each with the runner's pid and start time. It is
started with the variables the tasks' allow-list passes (TOCK_TASK_ENV_ALLOW) and given its
settings without the credentials runners never use: user code runs in forks of it.

A try's handle is ``pid@host:starttime``; it is alive when it is on this host, the pid
exists, and /proc says the process with that pid started at that time (pids are reused;
a zombie has ended: infra/procfs.py).

The core rules it relies on, rather than enforcing them itself:
- launch after commit: it is asked to launch a try only once its TaskQueued is committed, and
  its handle is committed in TaskLaunched afterwards (services/scheduler/launching.py);
- the claim: two runners started for the same try run it once, the first TaskStarted in log
  order wins (services/runner/core/claim.py), so a repeated launch is harmless;
- liveness: a try's death is decided by its heartbeats (services/scheduler/core/liveness.py);
  ``is_alive`` only answers for this host's handles (None for another host's) and speeds an
  adoption after a takeover. A kill is the runner's to obey when it reads TaskKillRequested.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from collections.abc import Sequence

from infra.executors.handles import local_handle
from infra.executors.messages import TryMessage
from infra.executors.requests import TryRequest
from infra.procfs import process_runs
from infra.settings import Settings
from infra.task_environment import TaskEnvironment, runner_settings_json

log = logging.getLogger("tock.executor.local")

NAME = "local"


class LauncherFailed(RuntimeError):
    """The warm launcher process died or answered nonsense."""


class LocalExecutor:
    """Launches tries through the warm launcher (started on first use)."""

    name = NAME

    def __init__(self, settings: Settings, launcher_command: Sequence[str]) -> None:
        """``launcher_command``: the argv that starts the warm launcher, given by the composition (tock_cli):
        infra never names the service it starts."""
        if not launcher_command:
            raise ValueError("the local executor needs the command that starts its launcher")
        self._settings = settings
        self._launcher_command = list(launcher_command)
        self._launcher: subprocess.Popen | None = None
        self.hostname = settings.host

    def launch_many(self, requests: list[tuple[TryRequest, str]]) -> list[str]:
        """Start several tries (request, queue) at once; returns their handles in order."""
        launcher = self._running_launcher()
        lines = "".join(TryMessage(request, NAME, queue).to_json() + "\n" for request, queue in requests)
        try:
            launcher.stdin.write(lines)
            launcher.stdin.flush()
            answers = [launcher.stdout.readline().split() for _ in requests]
            return [local_handle(int(pid), self.hostname, int(start)) for pid, start in answers]
        except (OSError, ValueError) as error:
            self.close()
            raise LauncherFailed(f"the local launcher failed to start {len(requests)} tries: {error}") from error

    def is_alive(self, handle: str) -> bool | None:
        """True/False for a handle of this host; None (cannot tell) for another host's."""
        return is_alive(handle, self.hostname)

    def close(self) -> None:
        """Stop the launcher; the tries it started keep running."""
        launcher, self._launcher = self._launcher, None
        if launcher is None:
            return
        for stream in (launcher.stdin, launcher.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            launcher.wait(timeout=5)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()

    def _running_launcher(self) -> subprocess.Popen:
        if self._launcher is not None and self._launcher.poll() is None:
            return self._launcher
        # Its runners fork the tries' user code: it holds none of the scheduler's secrets, neither
        # in its environment (readable in /proc) nor in its settings (infra/task_environment.py).
        environment = TaskEnvironment.of(self._settings).for_runner(os.environ)
        launcher = subprocess.Popen(self._launcher_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, bufsize=1, start_new_session=True, env=environment)
        launcher.stdin.write(runner_settings_json(self._settings) + "\n")
        launcher.stdin.flush()
        self._launcher = launcher
        log.info("local launcher started (pid %d)", launcher.pid)
        return launcher


def is_alive(handle: str, hostname: str | None = None) -> bool | None:
    """Whether the process a local handle names still runs (None when it names another host)."""
    try:
        pid_text, rest = handle.split("@", 1)
        host, start_text = rest.rsplit(":", 1)
        pid, start = int(pid_text), int(start_text)
    except ValueError:
        return False
    if host != (hostname or socket.gethostname()):
        return None
    return process_runs(pid, start)

