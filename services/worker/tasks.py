"""The worker's one Celery task: hand the try to this pool process's resident runner and wait for it
(resident.py): the message is acknowledged after the try ended (acks late). Whether the try runs at all is the claim's to decide: a second delivery of
the same try (a redelivery, a duplicate send) finds another runner's TaskStarted first and ends
at once, ``ALREADY_STARTED``, without running user code.
"""

from __future__ import annotations

import logging

from celery import Celery

from infra.executors.celery import RUN_TRY_TASK, celery_app
from infra.settings import Settings
from services.runner import ALREADY_STARTED
from services.worker.resident import ResidentRunner

log = logging.getLogger("tock.worker")


def worker_app(settings: Settings) -> Celery:
    """The Celery app of ``tock worker``, with the task that runs tries."""
    app = celery_app(settings, name="tock-worker")
    runner = ResidentRunner(settings)

    @app.task(name=RUN_TRY_TASK, acks_late=True)
    def run_try(payload: dict) -> int:
        request = payload["try"]
        code = runner.run(payload)
        if code == ALREADY_STARTED:
            log.info("try %s/%s/%s#%s was claimed by another runner: not run again", request["dag_id"],
                     request["run_id"], request["task_id"], request["try_number"])
        return code

    return app
