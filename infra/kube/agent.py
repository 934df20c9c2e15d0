"""The one node agent `tock kube start` runs beside the local API server.

The node agent (`tock node-agent --node NAME`, the kubelet stand-in: no container runtime
here) is a Tock command; it is started only when this installation has it, which is asked of
the command line itself (`tock node-agent --help`), so infra never imports the service.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from infra.settings import ENV_PREFIX, Settings

MARKER = b"node-agent"


def node_name(settings: Settings) -> str:
    """``<host>-agent``, made a valid Kubernetes node name (lower case, dots and dashes)."""
    name = re.sub(r"[^a-z0-9.-]+", "-", f"{settings.host}-agent".lower())
    return name.strip("-.") or "tock-agent"


def tock_command() -> str:
    """The installed ``tock`` command beside this interpreter (infra starts the product's command,
    never one of its modules by name)."""
    return str(Path(sys.executable).with_name("tock"))


def agent_command(settings: Settings) -> list[str]:
    return [tock_command(), "node-agent", "--node", node_name(settings)]


def agent_environment(settings: Settings) -> dict[str, str]:
    """This process's environment without its TOCK_* variables, plus ``settings`` as TOCK_* ones,
    so the agent reads exactly the settings it was started with."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(ENV_PREFIX)}
    ours = {f"{ENV_PREFIX}{name.upper()}": str(value)
            for name, value in settings.model_dump(exclude_unset=True, exclude_none=True).items()}
    return {**inherited, **ours}


def agent_installed(settings: Settings, timeout: float = 60.0) -> bool:
    """Whether ``tock node-agent`` exists in this installation."""
    command = [*agent_command(settings)[:2], "--help"]
    try:
        result = subprocess.run(command, env=agent_environment(settings), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0
