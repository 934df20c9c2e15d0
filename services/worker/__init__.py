"""``tock worker``: a Celery worker whose task runs one try with the runner's rules (claim, supervise,
heartbeat, outcome straight to Kafka)."""

from services.worker.tasks import worker_app

__all__ = ["worker_app"]
