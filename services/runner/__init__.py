"""``tock run-task``: runs tries it claimed through the log, supervising the user code, reporting straight to Kafka.

The runner is the same code under every executor; its public entry points are the names below
(the worker and the composition, tock_cli, use nothing else of this package).
"""

import sys

from infra.executors.requests import TryRequest
from services.runner.runner import ALREADY_STARTED, FAILED, RunnerClients, run_tries, run_try, serve_tries

__all__ = ["ALREADY_STARTED", "FAILED", "RunnerClients", "TryRequest", "local_launcher_command", "run_tries",
           "run_try", "serve_tries"]


def local_launcher_command() -> list[str]:
    """The command that starts the local executor's warm launcher (services/runner/launcher.py) in this
    interpreter; the local executor is given it (infra/executors/local.py)."""
    return [sys.executable, "-m", "services.runner.launcher"]
