"""run_tries: claim the tries through the log, supervise the user code of those won, report each outcome.

The claim: the runner appends a TaskStarted per try, then reads the tries' partitions;
the first TaskStarted of a try in log order wins, and a TaskKillRequested before any
TaskStarted means nobody runs it (claim.py). Tries won run, each in a process group that
the runner's group watcher kills if the runner dies (infra/group_watcher.py); tries lost exit
ALREADY_STARTED and write nothing more. While they run, the claim reader keeps reading
their partitions: a TaskKillRequested of a running try kills its process group and the
try ends TaskKilled. A try ends TaskSucceeded (with what a branch or short circuit follows),
TaskTrySkipped (its code raised the skip exception; exit code 0, as a success), TaskFailed or
TaskKilled. Outcomes are spooled until acknowledged (delivery.py), and a runner
first resends what dead runners spooled.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message

from infra.executors.handles import own_handle
from infra.executors.requests import TryRequest
from infra.group_watcher import GroupWatcher
from infra.log import KafkaEventLog
from infra.secrets import secrets_backends
from infra.secrets.audit import secret_accessed_events
from infra.settings import Settings
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from schemas import (
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskPoked,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
)
from services.runner.child import ChildSetup
from services.runner.claim_reader import ClaimReader
from services.runner.core.claim import Claims, TryKey
from services.runner.core.commands import commands_of
from services.runner.delivery import RUNNER_PRODUCER, Deliveries
from services.runner.every import Every
from services.runner.log_shipping import LogShipping, close_log_producer, log_producer
from services.runner.output import commit_output, output_records
from services.runner.spool import Spool
from services.runner.supervise import Outcome, supervise_all
from tock.secrets import SecretsBackend

log = logging.getLogger("tock.runner")

SUCCEEDED, FAILED, ALREADY_STARTED = 0, 1, 3  # exit codes of `tock run-task`


@dataclass(frozen=True, slots=True)
class RunnerClients:
    """A runner's connections to the log and its group watcher, ready before its tries arrive
    (a warm runner's)."""

    watcher: GroupWatcher
    events: KafkaEventLog
    claims: ClaimReader
    logs: KafkaEventLog  # ships the tries' log lines (log_shipping.py)

    @classmethod
    def connect(cls, settings: Settings) -> RunnerClients:
        watcher = GroupWatcher.start()  # forked first, while this process has no Kafka client threads
        return cls(watcher, KafkaEventLog(settings, client_id="tock-runner", config=RUNNER_PRODUCER),
                   ClaimReader(settings), log_producer(settings))

    def warm(self) -> None:
        self.claims.warm()

    def close(self) -> None:
        """Close the log clients; then the watcher, which kills whatever try is still enrolled
        (none, unless the runner is leaving on an error)."""
        try:
            self.claims.close()
            self.events.close()
        finally:
            close_log_producer(self.logs)
            self.watcher.close()


def run_try(settings: Settings, request: TryRequest, *, executor: str = "", queue: str = "",
            clients: RunnerClients | None = None) -> int:
    """Run one try to its end; returns the exit code. A try another runner claimed first is not run."""
    return run_tries(settings, [(request, queue)], executor=executor, clients=clients)[request]


def run_tries(settings: Settings, tries: list[tuple[TryRequest, str]], *, executor: str = "",
              clients: RunnerClients | None = None) -> dict[TryRequest, int]:
    """Run tries (request, queue) side by side, each in its own child; the exit code of each.

    One runner for a batch of tries pays the process, the Kafka connections and the claim's
    read once; each try still reports for itself and its user code is supervised on its own.
    """
    clients = clients or RunnerClients.connect(settings)
    try:
        return serve_tries(settings, clients, tries, executor=executor)
    finally:
        clients.close()


def serve_tries(settings: Settings, clients: RunnerClients, tries: list[tuple[TryRequest, str]], *,
                executor: str = "") -> dict[TryRequest, int]:
    """``run_tries`` with clients the caller keeps open: a resident runner serving try after try
    (a Celery pool process's) pays its process and connections once, not per try."""
    return _Runner(settings, clients, executor).run(tries)


class _Runner:
    """One batch of tries, from the claim to the last acknowledged outcome."""

    def __init__(self, settings: Settings, clients: RunnerClients, executor: str) -> None:
        self.settings, self.clients, self.executor = settings, clients, executor
        self.events = clients.events
        self.deliveries = Deliveries(settings, self.events, Spool.of_this_process(settings.home))
        self.runner_ids: dict[TryKey, str] = {}
        self.requests: dict[TryKey, TryRequest] = {}
        self.unstarted: set[TryKey] = set()  # tries whose TaskStarted the broker refused
        self.queued: Mapping[TryKey, TaskQueued] = {}  # the TaskQueued the claim read: each try's context
        self._heartbeat_trouble = Every(10.0, now=True)

    def run(self, tries: list[tuple[TryRequest, str]]) -> dict[TryRequest, int]:
        self.deliveries.resend_orphans()
        codes = dict.fromkeys((request for request, _queue in tries), ALREADY_STARTED)
        won = self._claim(tries)
        for request in [request for request in codes if request.key in self.unstarted]:
            codes[request] = FAILED
        self._supervise([(request, queue) for request, queue in tries if request.key in won], codes)
        self.deliveries.wait(self._heartbeat, self.settings.task_heartbeat_seconds)
        return codes

    def _claim(self, tries: list[tuple[TryRequest, str]]) -> frozenset[TryKey]:
        """Append a TaskStarted per try, read them back: the tries this runner won.

        No flush before the read: the producer sends at once (linger 0) while the reader looks
        up where to start, and reading our own TaskStarted back is the acknowledgement.
        """
        for request, queue in tries:
            self._announce(request, queue)
        queued_at = {key: request.queued_at for key, request in self.requests.items()}
        offsets = {key: request.queued_offset for key, request in self.requests.items()}
        claims = self.clients.claims.claim(self.runner_ids, queued_at, self._refused, offsets)
        self._log_lost(claims)
        self.queued = claims.queued
        return claims.won

    def _announce(self, request: TryRequest, queue: str) -> None:
        key = request.key
        self.requests[key] = request
        self.runner_ids[key] = runner_id = f"{self.settings.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        handle = own_handle(self.executor, self.settings.topic_prefix, request, self.settings.host)
        self.events.append(TaskStarted(**_ids(request), runner_id=runner_id, hostname=self.settings.host,
                                       pid=os.getpid(), executor=self.executor, queue=queue, handle=handle,
                                       log_path=str(TryPaths(self.settings.home, request).log), at=time.time()),
                           on_delivery=self._started_delivered(key))

    def _started_delivered(self, key: TryKey):
        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                log.error("try %s not run: its TaskStarted was refused (%s)", _name(key), error.str())
                self.unstarted.add(key)
        return delivered

    def _refused(self) -> set[TryKey]:
        """The tries whose TaskStarted the broker refused so far (delivery reports served now)."""
        self.events.producer.poll(0)
        return self.unstarted

    def _outcome_with_output(self, request: TryRequest, outcome: Outcome) -> Outcome:
        """A success with Kafka output: committed here with it (tock/kafka_output.py), or failed saying why."""
        if not (outcome.succeeded and outcome.output):
            return outcome
        try:
            records = output_records(outcome.output)
            error = commit_output(self.settings, _outcome_event(request, self.runner_ids[request.key], outcome),
                                  records)
        except ValueError as unreadable:
            error = str(unreadable)
        if not error:
            log.info("try %s: %d output record(s) committed with its success", _name(request.key), len(records))
            return outcome
        return Outcome(False, f"its Kafka output could not be committed with its success: {error}"[:2000],
                       rendered_json=outcome.rendered_json)

    def _log_lost(self, claims: Claims) -> None:
        for key, winner in claims.lost.items():
            log.warning("try %s was launched before: runner %s started it first; not running it again",
                        _name(key), winner)
        for key, reason in claims.killed.items():
            log.warning("try %s not run: the scheduler asked to stop it (%s) before any runner started it",
                        _name(key), reason)

    def _supervise(self, tries: list[tuple[TryRequest, str]], codes: dict[TryRequest, int]) -> None:
        shipping = LogShipping(self.settings, self.clients.logs)

        def ended(request: TryRequest, outcome: Outcome) -> None:
            shipping.ended(request.key)
            self._audit(request, outcome)
            for command in commands_of(outcome, time.time()):  # before the success that depends on them
                self.deliveries.send_command(command)
            outcome = self._outcome_with_output(request, outcome)
            if not (outcome.succeeded and outcome.output):  # (else its success is committed with its output)
                self.deliveries.send_outcome(request.key, _outcome_event(request, self.runner_ids[request.key],
                                                                         outcome))
            codes[request] = SUCCEEDED if outcome.ended_well else FAILED
            log.info("try %s %s", _name(request.key), _described(outcome))

        paths = [(request, TryPaths(self.settings.home, request)) for request, _queue in tries]
        for _request, try_paths in paths:
            try_paths.folder.mkdir(parents=True, exist_ok=True)
        running = [(request, str(try_paths.log)) for request, try_paths in paths]
        for request, log_path in running:
            shipping.follow(request, log_path, self.runner_ids[request.key])
        try:
            supervise_all(running, self.settings.task_heartbeat_seconds,
                          lambda requests: self._heartbeat([request.key for request in requests]), ended,
                          self.clients.watcher, self.clients.claims.kill_requests,
                          setup=ChildSetup(TaskEnvironment.of(self.settings), self.settings.xcom_max_bytes,
                                           self.queued, self._secrets))
        finally:
            self.clients.claims.stop_watching()
            shipping.close()

    def _secrets(self, environ: Mapping[str, str], writer: str) -> list[SecretsBackend]:
        """The secrets chain of a try's child, from the runner's environment (TOCK_VAR_*, TOCK_CONN_*)."""
        return secrets_backends(self.settings, environ, writer=writer)

    def _audit(self, request: TryRequest, outcome: Outcome) -> None:
        """A SecretAccessed per variable or connection the try read (the name, never the value), before its
        outcome. Best effort: an audit record the broker refuses is logged, it never holds the outcome."""
        for event in secret_accessed_events(request.dag_id, request.run_id, request.task_id, request.try_number,
                                            outcome.accessed, at=time.time()):
            try:
                self.events.append(event)
            except KafkaException as error:
                log.warning("try %s: its read of %s %s not recorded (%s)", _name(request.key), event.kind,
                            event.name, error)

    def _heartbeat(self, keys: list[TryKey]) -> None:
        """Heartbeat these tries and every try whose outcome the broker has not acknowledged yet.

        A heartbeat the client refuses to queue (e.g. the topic is unknown to it for a while) is
        a heartbeat missed, never a reason to end the runner and, with it, its tries' user code."""
        for key in dict.fromkeys([*keys, *self.deliveries.pending_tries()]):
            try:
                self.events.append(TaskHeartbeat(**_ids(self.requests[key]), runner_id=self.runner_ids[key],
                                                 at=time.time()))
            except KafkaException as error:
                if self._heartbeat_trouble.due():
                    log.warning("heartbeat of %s not queued (%s); the try runs on", _name(key), error)


def _outcome_event(request: TryRequest, runner_id: str, outcome: Outcome):
    if outcome.succeeded:
        follow = None if outcome.follow is None else list(outcome.follow)
        return TaskSucceeded(**_ids(request), runner_id=runner_id, values_json=outcome.values_json,
                             rendered_json=outcome.rendered_json, follow=follow,
                             asset_events_json=outcome.asset_events_json, at=time.time())
    if outcome.skipped:
        return TaskTrySkipped(**_ids(request), runner_id=runner_id, reason=outcome.reason,
                              values_json=outcome.values_json, rendered_json=outcome.rendered_json, at=time.time())
    if outcome.poked:
        return TaskPoked(**_ids(request), runner_id=runner_id, reschedule_at=outcome.reschedule_at,
                         timed_out=outcome.poke_timed_out, rendered_json=outcome.rendered_json, at=time.time())
    if outcome.killed:
        return TaskKilled(**_ids(request), runner_id=runner_id, reason=outcome.error, at=time.time())
    return TaskFailed(**_ids(request), runner_id=runner_id, error=outcome.error, traceback=outcome.traceback,
                      rendered_json=outcome.rendered_json, retryable=outcome.retryable, at=time.time())


def _described(outcome: Outcome) -> str:
    if outcome.succeeded:
        return "succeeded" if outcome.follow is None else f"succeeded, following {_listed(outcome.follow)}"
    if outcome.skipped:
        return f"skipped: {outcome.reason}"
    if outcome.poked:
        return "poked: its condition is not met" + (" and its timeout has passed" if outcome.poke_timed_out else "")
    return f"killed as the scheduler asked ({outcome.error})" if outcome.killed else f"failed: {outcome.error}"


def _listed(task_ids: tuple[str, ...]) -> str:
    return ", ".join(task_ids) if task_ids else "none of its downstream tasks"


def _ids(request: TryRequest) -> dict:
    return {"dag_id": request.dag_id, "run_id": request.run_id, "task_id": request.task_id,
            "map_index": request.map_index, "try_number": request.try_number}


def _name(key: TryKey) -> str:
    dag_id, run_id, task_id, try_number = key
    return f"{dag_id}/{run_id}/{task_id}#{try_number}"
