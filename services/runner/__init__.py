"""``tock run-task``: runs tries it claimed through the log, supervising the user code, reporting straight to Kafka."""

from infra.executors.requests import TryRequest
from services.runner.runner import ALREADY_STARTED, FAILED, RunnerClients, run_tries, run_try, serve_tries

__all__ = ["ALREADY_STARTED", "FAILED", "RunnerClients", "TryRequest", "run_tries", "run_try", "serve_tries"]
