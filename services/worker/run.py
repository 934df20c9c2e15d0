"""Starting the Celery worker process of ``tock worker``, with its presence in the log.

The presence (WorkerHeartbeat every TOCK_TASK_HEARTBEAT_SECONDS, WorkerStopped on a clean
stop) comes from a small process forked first, before Celery and its pool exist: the pool's
processes are forked from the worker's main process, which must hold no Kafka client threads
when it forks. The presence process dies with the worker (SIGKILL: a worker killed says
nothing, it falls silent) and says WorkerStopped only when the worker stops cleanly.

With a schema registry, the worker learns every topic's writer id before it forks anything: the
pool processes inherit them and pass them to their resident runners (TOCK_SCHEMA_IDS), which then
ask the registry nothing. A registry away for longer than TOCK_SCHEMA_REGISTRY_TIMEOUT stops the
worker at its start, saying so, never a runner in the middle of a try.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass

from infra.executors.celery import NAME
from infra.group_watcher import die_with_parent
from infra.registry import RegistryError, register_all
from infra.settings import Settings

log = logging.getLogger("tock.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    queues: tuple[str, ...]
    concurrency: int


def run_worker(settings: Settings, options: WorkerOptions) -> int:
    """Run the worker until it is shut down; its exit code."""
    node = f"tock@{settings.host}"
    try:
        register_all(settings)
    except RegistryError as error:
        log.error("worker %s cannot start: %s", node, error)
        return 1
    presence = _start_presence(settings, node, options)
    from services.worker.tasks import worker_app

    app = worker_app(settings)
    log.info("worker %s: queues %s, concurrency %d, broker %s", node, ",".join(options.queues),
             options.concurrency, settings.celery_broker_url)
    worker = app.Worker(hostname=node, queues=list(options.queues), concurrency=options.concurrency,
                        pool="prefork", loglevel=settings.log_level, without_mingle=True, without_gossip=True,
                        optimization="fair")
    try:
        worker.start()
    finally:
        _stop_presence(presence)
    return worker.exitcode or 0


def _start_presence(settings: Settings, node: str, options: WorkerOptions) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            die_with_parent(signal.SIGKILL, parent)
            _beat_until_stopped(settings, node, options)
            code = 0
        except BaseException:  # noqa: BLE001 - the worker runs on without its presence; say why
            log.exception("worker presence failed")
        finally:
            os._exit(code)
    return pid


def _beat_until_stopped(settings: Settings, node: str, options: WorkerOptions) -> None:
    from services.worker.presence import WorkerPresence

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the worker's; it tells us with SIGTERM
    with WorkerPresence(settings, node, NAME, options.queues, options.concurrency) as presence:
        while not stop.is_set():
            presence.beat()
            stop.wait(presence.interval)
        presence.stopped()


def _stop_presence(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
