"""Where a try keeps its output and its claim under TOCK_HOME, and what a launch asks for."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TryRequest:
    """One try to run: what the executor passes to ``tock run-task``."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    dag_file: str
    execution_timeout: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


class TryPaths:
    """``<home>/tries/<dag>/<run>/<task>/<try>.log`` and the claim file beside it."""

    def __init__(self, home: Path, request: TryRequest) -> None:
        self.folder = home / "tries" / request.dag_id / _safe(request.run_id) / request.task_id
        self.log = self.folder / f"{request.try_number}.log"
        self.claim_file = self.folder / f"{request.try_number}.claimed"

    def claim(self) -> bool:
        """Claim the try for this process; False if it was claimed before (a second launch)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(self.claim_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.write(descriptor, f"{os.getpid()}\n".encode())
        os.close(descriptor)
        return True


def _safe(run_id: str) -> str:
    # Scheduled run ids contain ':' and '+'; keep file names portable.
    return run_id.replace(":", "-").replace("+", "_").replace("/", "_")
