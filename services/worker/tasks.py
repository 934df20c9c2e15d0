"""The worker's one Celery task: hand the try to this pool process's resident runner and wait for it
(resident.py): the message is acknowledged after the try ended (acks late). Its argument is a
try message (infra/executors/messages.py). Whether the try runs at all is the claim's to decide
(services/runner/core/claim.py): a second delivery of the same try (a redelivery, a duplicate
send) finds another runner's TaskStarted first and ends at once, ``ALREADY_STARTED``, without
running user code.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery

from infra.executors.celery import NAME, RUN_TRY_TASK, celery_app
from infra.executors.messages import TryMessage
from infra.settings import Settings
from services.runner import ALREADY_STARTED
from services.worker.resident import ResidentRunner

log = logging.getLogger("tock.worker")


def worker_app(settings: Settings) -> Celery:
    """The Celery app of ``tock worker``, with the task that runs tries."""
    app = celery_app(settings, name="tock-worker")
    runner = ResidentRunner(settings)

    @app.task(name=RUN_TRY_TASK, acks_late=True)
    def run_try(payload: dict[str, Any]) -> int:
        message = TryMessage.from_dict(payload, executor=NAME)  # a message sent before it named its executor
        code = runner.run(message)
        if code == ALREADY_STARTED:
            log.info("try %s/%s/%s#%s was claimed by another runner: not run again", *message.request.key)
        return code

    return app
