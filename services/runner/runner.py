"""run_tries: claim the tries, report TaskStarted, supervise the user code, report each outcome."""

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
from services.runner.supervise import Outcome, supervise_all

log = logging.getLogger("tock.runner")

SUCCEEDED, FAILED, ALREADY_STARTED = 0, 1, 3  # exit codes of `tock run-task`


def run_try(settings: Settings, request: TryRequest, *, executor: str = "", queue: str = "",
            events: KafkaEventLog | None = None) -> int:
    """Run one try to its end; returns the exit code. A try claimed before is not run again.

    ``events`` may be a producer created earlier (a warm runner's), so the first delivery
    does not wait for the client to connect.
    """
    return run_tries(settings, [(request, queue)], executor=executor, events=events)[request]


def run_tries(settings: Settings, tries: list[tuple[TryRequest, str]], *, executor: str = "",
              events: KafkaEventLog | None = None) -> dict[TryRequest, int]:
    """Run tries (request, queue) side by side, each in its own child; the exit code of each.

    One runner for a batch of tries pays the process and the Kafka connection once; each
    try still reports for itself and its user code is supervised in a child of its own.
    """
    codes = dict.fromkeys((request for request, _queue in tries), ALREADY_STARTED)
    claimed = [(request, queue, paths) for request, queue in tries
               if _claim(paths := TryPaths(settings.home, request), request)]
    if not claimed:
        return codes
    hostname = socket.gethostname()
    runner_ids = {request: f"{hostname}:{os.getpid()}:{uuid.uuid4().hex[:8]}" for request, _queue, _paths in claimed}
    events = events or KafkaEventLog(settings, client_id="tock-runner")
    try:
        for request, queue, paths in claimed:
            events.append(TaskStarted(**_ids(request), runner_id=runner_ids[request], hostname=hostname,
                                      pid=os.getpid(), executor=executor, queue=queue, log_path=str(paths.log),
                                      at=time.time()))
        events.producer.poll(0)

        def beat(request: TryRequest) -> None:
            events.append(TaskHeartbeat(**_ids(request), runner_id=runner_ids[request], at=time.time()))

        def ended(request: TryRequest, outcome: Outcome) -> None:
            events.append(_outcome_event(request, runner_ids[request], outcome))
            codes[request] = SUCCEEDED if outcome.succeeded else FAILED
            log.info("try %s %s", _name(request), "succeeded" if outcome.succeeded else f"failed: {outcome.error}")

        supervise_all([(request, str(paths.log)) for request, _queue, paths in claimed],
                      settings.task_heartbeat_seconds, beat, ended)
    finally:
        events.close()
    return codes


def _claim(paths: TryPaths, request: TryRequest) -> bool:
    if paths.claim():
        return True
    log.warning("try %s was launched before (%s exists): not running it again", _name(request), paths.claim_file)
    return False


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
