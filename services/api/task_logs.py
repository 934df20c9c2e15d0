"""A try's log file, read whole or followed while the try runs (``tock tasks logs`` and the API).

The runner writes a try's output to ``<TOCK_HOME>/tries/<dag>/<safe run id>/<task>/<try>.log``
(:class:`services.runner.paths.TryPaths`) on the host that ran it. Following ends once the
``task_instance`` table says the try has ended, after reading what the file holds by then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.runner.paths import TryPaths, TryRequest

CHUNK = 64 * 1024
POLL_SECONDS = 0.5
_LIVE_STATES = ("queued", "running")


def log_file(home: Path, dag_id: str, run_id: str, task_id: str, try_number: int) -> Path:
    """Where the runner writes this try's output; refuses names that would leave ``home/tries``."""
    path = TryPaths(home, TryRequest(dag_id, run_id, task_id, try_number, dag_file="")).log
    root = (home / "tries").resolve()
    if root not in path.resolve().parents:
        raise ValueError(f"not a log file under {root}: {path}")
    return path


def try_has_ended(instance: dict[str, Any] | None, try_number: int) -> bool:
    """Whether try ``try_number`` is over as the table shows it: a later try exists, or the
    instance is in any state but queued / running (marked, cleared, killed, failed...)."""
    if instance is None:
        return False  # not even queued yet as far as the table knows
    if instance["try_number"] is None:
        return instance["state"] is not None  # ended without running (upstream failed, removed, marked)
    if instance["try_number"] != try_number:
        return instance["try_number"] > try_number
    return instance["state"] not in _LIVE_STATES


def read_from(path: Path, offset: int) -> bytes:
    """What the file holds from ``offset`` (at most CHUNK bytes); empty if it does not exist yet."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(CHUNK)
    except FileNotFoundError:
        return b""
