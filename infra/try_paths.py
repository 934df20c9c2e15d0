"""Where a try keeps its output under TOCK_HOME.

The runner writes there (services/runner) and the API reads there when the log topic has
nothing of the try (services/api/task_logs.py): one layout, declared once, here.
"""

from __future__ import annotations

from pathlib import Path

from infra.executors.requests import TryRequest


class TryPaths:
    """``<home>/tries/<dag>/<run>/<task>/<try>.log`` (a mapped task's instance N: ``<try>.mN.log``)."""

    def __init__(self, home: Path, request: TryRequest) -> None:
        self.folder = home / "tries" / request.dag_id / _safe(request.run_id) / request.task_id
        mapped = f".m{request.map_index}" if request.map_index >= 0 else ""
        self.log = self.folder / f"{request.try_number}{mapped}.log"


def _safe(run_id: str) -> str:
    # Scheduled run ids contain ':' and '+'; keep file names portable.
    return run_id.replace(":", "-").replace("+", "_").replace("/", "_")
