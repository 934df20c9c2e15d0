"""``tock run-task``: runs one try, supervising the user code in a child, reporting straight to Kafka."""

from services.runner.paths import TryPaths, TryRequest
from services.runner.runner import ALREADY_STARTED, run_tries, run_try

__all__ = ["ALREADY_STARTED", "TryPaths", "TryRequest", "run_tries", "run_try"]
