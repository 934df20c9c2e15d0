"""run_try: claim the try, report TaskStarted, supervise the user code, report the outcome."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

from infra.log import KafkaEventLog
from infra.settings import Settings
from schemas import TaskFailed, TaskHeartbeat, TaskStarted, TaskSucceeded
from services.runner.paths import TryPaths, TryRequest
from services.runner.supervise import Outcome, supervise

log = logging.getLogger("tock.runner")

SUCCEEDED, FAILED, ALREADY_STARTED = 0, 1, 3  # exit codes of `tock run-task`


def run_try(settings: Settings, request: TryRequest, *, executor: str = "", queue: str = "",
            events: KafkaEventLog | None = None) -> int:
    """Run one try to its end; returns the exit code. A try claimed before is not run again.

    ``events`` may be a producer created earlier (a warm runner's), so the first delivery
    does not wait for the client to connect.
    """
    paths = TryPaths(settings.home, request)
    if not paths.claim():
        log.warning("try %s was launched before (%s exists): not running it again", _name(request),
                    paths.claim_file)
        return ALREADY_STARTED
    runner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    events = events or KafkaEventLog(settings, client_id="tock-runner")
    try:
        events.append(TaskStarted(**_ids(request), runner_id=runner_id, hostname=socket.gethostname(),
                                  pid=os.getpid(), executor=executor, queue=queue, log_path=str(paths.log),
                                  at=time.time()))
        events.producer.poll(0)

        def beat() -> None:
            events.append(TaskHeartbeat(**_ids(request), runner_id=runner_id, at=time.time()))
            events.producer.poll(0)

        outcome = supervise(request, str(paths.log), settings.task_heartbeat_seconds, beat)
        events.append(_outcome_event(request, runner_id, outcome))
    finally:
        events.close()
    log.info("try %s %s", _name(request), "succeeded" if outcome.succeeded else f"failed: {outcome.error}")
    return SUCCEEDED if outcome.succeeded else FAILED


def _outcome_event(request: TryRequest, runner_id: str, outcome: Outcome):
    if outcome.succeeded:
        return TaskSucceeded(**_ids(request), runner_id=runner_id, at=time.time())
    return TaskFailed(**_ids(request), runner_id=runner_id, error=outcome.error, traceback=outcome.traceback,
                      at=time.time())


def _ids(request: TryRequest) -> dict:
    return {"dag_id": request.dag_id, "run_id": request.run_id, "task_id": request.task_id,
            "try_number": request.try_number}


def _name(request: TryRequest) -> str:
    return f"{request.dag_id}/{request.run_id}/{request.task_id}#{request.try_number}"
