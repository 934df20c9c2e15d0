"""Where a node agent keeps its files: ``<TOCK_HOME>/node-agent/<node>/``.

- ``pods/<pod>/``             the pod's working directory and its TOCK_HOME
- ``logs/<pod>.log``          the container's stdout and stderr
- ``containers/<pod>.json``   the agent's record: pod uid, shim pid, its start time, kill reason
- ``containers/<pod>.exit``   the exit code, written by the shim when the command ends
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AgentPaths:
    home: Path

    @classmethod
    def of(cls, tock_home: Path, node: str) -> AgentPaths:
        return cls(tock_home / "node-agent" / node)

    def pod_dir(self, pod: str) -> Path:
        return self.home / "pods" / pod

    def log_file(self, pod: str) -> Path:
        return self.home / "logs" / f"{pod}.log"

    def record(self, pod: str) -> Path:
        return self.home / "containers" / f"{pod}.json"

    def exit_file(self, pod: str) -> Path:
        return self.home / "containers" / f"{pod}.exit"

    def recorded_pods(self) -> list[str]:
        folder = self.home / "containers"
        return sorted(path.stem for path in folder.glob("*.json")) if folder.is_dir() else []


def write_json(path: Path, value: dict) -> None:
    """Atomically (a crash leaves the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value))
    os.replace(partial, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
