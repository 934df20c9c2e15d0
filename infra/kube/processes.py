"""Detached processes of the local control plane, each known by a pid file.

A pid file alone is not trusted: the pid must be alive and its command line must contain the
process's marker (its binary's name), so a recycled pid is never mistaken for ours or signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.broker import pid_alive, wait_for_exit


@dataclass(frozen=True)
class DetachedProcess:
    """One process started in its own session, its output appended to ``log_file``."""

    name: str
    pid_file: Path
    log_file: Path
    marker: bytes

    def live_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) and self.marker in _cmdline(pid) else None

    def launch(self, command: Sequence[str], environment: Mapping[str, str] | None = None) -> int:
        """Start ``command`` detached (own session, stdin closed); returns its pid."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as output:
            process = subprocess.Popen(list(command), stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env=dict(environment) if environment is not None else None)
        self.pid_file.write_text(f"{process.pid}\n")
        return process.pid

    def stop(self, timeout: float) -> bool:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. False if it was not running."""
        pid = self.live_pid()
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            if not wait_for_exit(pid, timeout):
                _signal(pid, signal.SIGKILL)
                wait_for_exit(pid, 10)
        self.pid_file.unlink(missing_ok=True)
        return pid is not None


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
