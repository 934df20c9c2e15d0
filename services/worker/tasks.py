"""The worker's one Celery task: hand the try to a warm runner of this pool process and wait for it.

Each pool process keeps one runner forked in advance and already connected to Kafka (as the
local executor's launcher does), so a try pays no process start or connection on its way in.
The runner stays in the worker's process group and dies with its pool process (SIGTERM: the
try ends reported, e.g. when a revoke terminates it); its try's user code dies with the runner
(the group watcher). Whether the try runs at all is the claim's to decide: a second delivery of
the same try (a redelivery, a duplicate send) finds another runner's TaskStarted first and ends
at once, ``ALREADY_STARTED``, without running user code.
"""

from __future__ import annotations

import json
import logging
import os

from celery import Celery

from infra.executors.celery import NAME, RUN_TRY_TASK, celery_app
from infra.settings import Settings
from services.runner import ALREADY_STARTED
from services.runner.launcher import Spares

log = logging.getLogger("tock.worker")


class PoolRunners:
    """The warm runner of the current pool process (forked on its first task, then after each)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._spares: Spares | None = None
        self._owner = 0  # the pool process the spares belong to (they are forked per process)

    def run(self, payload: dict) -> int:
        """Run one try in a warm runner; its exit code (0 ok, 1 failed, 3 another runner had it)."""
        spares = self._of_this_process()
        line = json.dumps({"try": payload["try"], "executor": NAME, "queue": payload.get("queue", "")}) + "\n"
        [pid] = spares.hand_over([line])
        spares.fill()  # the next try's runner connects while this one runs
        _pid, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    def _of_this_process(self) -> Spares:
        if self._spares is None or self._owner != os.getpid():
            self._spares, self._owner = Spares(self.settings, 1, detached=False), os.getpid()
        return self._spares


def worker_app(settings: Settings) -> Celery:
    """The Celery app of ``tock worker``, with the task that runs tries."""
    app = celery_app(settings, name="tock-worker")
    runners = PoolRunners(settings)

    @app.task(name=RUN_TRY_TASK, acks_late=True)
    def run_try(payload: dict) -> int:
        request = payload["try"]
        code = runners.run(payload)
        if code == ALREADY_STARTED:
            log.info("try %s/%s/%s#%s was claimed by another runner: not run again", request["dag_id"],
                     request["run_id"], request["task_id"], request["try_number"])
        return code

    return app
