"""The monitor's shell: own partitions of tock.events, replay them, fold, decide deadline misses,
commit them with the consumed offsets, and serve the windowed tables over HTTP.

Exactly one DeadlineMissed per run (and one TaskDeadlineMissed per task instance: the same rules), through the log:

* Monitors share one consumer group (``<prefix>tock-monitor``) on tock.events, so each
  partition (= each DAG, see infra/log/partitioner.py) has one owner at a time.
* On being assigned a partition, a monitor first waits out any transaction a previous
  owner left open (``settle``), then replays that partition of tock.dags and tock.events
  from offset 0 up to its end. Only then does it decide: it has seen every DeadlineMissed
  that any earlier owner (another monitor, or its own previous life before a ``kill -9``)
  committed. A folded DeadlineMissed marks its run as done.
* Its DeadlineMissed events are written in a Kafka transaction that also commits its
  consumed offsets with its consumer-group metadata (KIP-447). A monitor that lost the
  partition in a rebalance (frozen, partitioned away) cannot commit: its transaction is
  aborted, so read_committed readers, the next owner included, never see its decision.
* A committed decision is folded at once, so the owner never decides it twice; its copy
  read back from the log changes nothing.

Callbacks (a DAG's ``on_failure`` / ``on_deadline_missed``: webhook URLs, or ``module:function``
paths run in a subprocess with a timeout) are called by the owner of the DAG's partition, on
worker threads (infra/callbacks.py: retried with backoff), and each
call sequence ends with a CallbackCalled committed like a miss; the log settles it. A monitor
that dies or loses the partition between the call and that commit leaves it owed, and the
next owner calls again: callbacks are at least once (a receiver may dedupe on dag_id, run_id,
trigger and, for a task instance's miss, task_id, which the payload carries).

Why not faust-streaming: faust 0.15.3 (aiokafka 0.14) does join a consumer group on this
Kafka 4.1 broker, but aiokafka has no KIP-447 transactional offset commits, so a monitor
that lost its partitions could still write a DeadlineMissed the next owner also writes;
DESIGN.md keeps confluent-kafka transactions for that reason. The state is the core's
fold held in memory and rebuilt from the log on every assignment (no changelog topics,
so nothing beyond Tock's own topics must exist).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from confluent_kafka import TopicPartition

from infra.callbacks import CallbackCaller
from infra.log import EventReader, LogRecord, PartitionsLost, TransactionAborted, TransactionalSession, replay, settle
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DAGS, EVENTS, CallbackCalled
from services.monitor.core import (
    DagDefinitionRemoved,
    MonitorState,
    Notification,
    UnknownEvent,
    decide,
    due_notifications,
    evolve,
    next_deadline,
)

log = logging.getLogger("tock.monitor")

MAX_POLL_WAIT = 0.2
ASSIGNMENT = "cooperative-sticky"
RETRY_FIRST, RETRY_MOST = 1.0, 30.0  # seconds between attempts at a failed takeover


def new_monitor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class PartitionFold:
    """One owned partition: its state and the next offset of tock.dags and tock.events."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state = MonitorState()
        self.positions = {DAGS: 0, EVENTS: 0}

    def fold_record(self, logical: str, record: LogRecord) -> None:
        self.positions[logical] = record.offset + 1
        event = record.event
        if event is None:
            if logical != DAGS or record.key is None:
                return
            event = DagDefinitionRemoved(record.key)
        try:
            evolve(self.state, event)
        except UnknownEvent as error:
            log.warning("partition %d: %s; ignored", self.partition, error)


def rebuild(settings: Settings, partitions: list[int], client_id: str) -> dict[int, PartitionFold]:
    """Replay partitions of tock.dags then tock.events up to their ends into fresh folds."""
    folds = {partition: PartitionFold(partition) for partition in partitions}
    for logical in (DAGS, EVENTS):
        for record in replay(settings, logical, partitions, client_id=f"{client_id}-replay-{logical}"):
            folds[record.partition].fold_record(logical, record)
    return folds


class Monitor:
    """One monitor instance. ``run()`` until ``stop()`` (from a signal handler or another thread)."""

    def __init__(self, settings: Settings, *, monitor_id: str | None = None) -> None:
        self.settings = settings
        self.monitor_id = monitor_id or new_monitor_id()
        self.group_id = f"{settings.topic_prefix}tock-monitor"
        self.folds: dict[int, PartitionFold] = {}
        self.lock = threading.Lock()  # guards folds against the HTTP thread
        self.unreplayed: dict[int, tuple[float, float]] = {}  # partition -> (next attempt, backoff)
        self.fired = 0  # DeadlineMissed committed by this instance
        self.callbacks_called = {"ok": 0, "failed": 0}  # CallbackCalled committed by this instance
        # Callbacks being called (key -> partition, notification, future); kept until their
        # CallbackCalled commits, so a call owed is never started twice by this instance.
        self.in_flight: dict[tuple, tuple[int, Notification, object]] = {}
        self._stop = threading.Event()
        self._topics = {topic_name(settings.topic_prefix, logical): logical for logical in (DAGS, EVENTS)}

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> None:
        """Join the group and monitor until stopped. Raises Fenced if this instance must not go on."""
        timeout_ms = int(self.settings.monitor_session_timeout * 1000)
        self.session = TransactionalSession(self.settings, f"{self.settings.topic_prefix}tock-monitor-"
                                            f"{self.monitor_id}", config={"transaction.timeout.ms": timeout_ms})
        self.caller = CallbackCaller(callable_timeout=self.settings.monitor_callback_timeout)
        self.side = EventReader(self.settings, [], client_id=f"tock-monitor-side-{self.monitor_id}")
        self.events = EventReader(self.settings, [EVENTS], group_id=self.group_id, on_assign=self._assigned,
                                  on_revoke=self._revoked, client_id=f"tock-monitor-{self.monitor_id}",
                                  config={"partition.assignment.strategy": ASSIGNMENT,
                                          "session.timeout.ms": timeout_ms,
                                          "heartbeat.interval.ms": max(100, timeout_ms // 5)})
        log.info("monitor %s started", self.monitor_id)
        try:
            while not self._stop.is_set():
                self.step()
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def _close(self) -> None:
        for closing in (self.events.close, self.side.close, self.session.close, self.caller.close):
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)
        log.info("monitor %s stopped (%d deadline misses written)", self.monitor_id, self.fired)

    # -- one turn of the loop ------------------------------------------------------------------
    def step(self) -> None:
        """Poll, fold, decide, commit, and fold what was committed."""
        records = self.events.poll(self._poll_wait(), 1)
        records += self.events.poll(0, 5000) + self.side.poll(0, 5000)
        self._retry_takeovers()
        now = time.time()
        with self.lock:
            for record in records:
                fold = self.folds.get(record.partition)
                if fold is not None:  # else: not ours (any more)
                    fold.fold_record(self._topics[record.topic], record)
            decisions = [(partition, event) for partition, fold in self.folds.items()
                         for event in decide(fold.state, now)]
            owed = [(partition, notification) for partition, fold in self.folds.items()
                    for notification in due_notifications(fold.state.notifications)]
        self._call_back(owed)
        decisions += self._calls_ended(now)
        if decisions:
            self._commit(decisions)

    def _call_back(self, owed: list[tuple[int, Notification]]) -> None:
        """Start the calls owed that are not under way (the owner calls; a call ends with an event)."""
        for partition, notification in owed:
            if notification.key not in self.in_flight:
                future = self.caller.call(notification.target, notification.payload)
                self.in_flight[notification.key] = (partition, notification, future)

    def _calls_ended(self, now: float) -> list[tuple[int, CallbackCalled]]:
        ended = []
        for partition, notification, future in self.in_flight.values():
            if future.done():
                outcome = future.result()
                ended.append((partition, CallbackCalled(
                    dag_id=notification.dag_id, run_id=notification.run_id, trigger=notification.trigger,
                    task_id=notification.task_id, target=notification.target, attempts=outcome.attempts,
                    ok=outcome.ok, detail=outcome.detail, at=now)))
        return ended

    def _poll_wait(self) -> float:
        with self.lock:
            soonest = min((next_deadline(fold.state) for fold in self.folds.values()), default=float("inf"))
        return min(max(soonest - time.time(), 0.0), MAX_POLL_WAIT)

    def _commit(self, decisions: list) -> None:
        offsets = {(topic_name(self.settings.topic_prefix, EVENTS), partition): fold.positions[EVENTS]
                   for partition, fold in self.folds.items()}
        started = time.time()
        try:
            self.session.commit([event for _partition, event in decisions], self.events, offsets)
        except TransactionAborted as error:
            kind = "partitions moved" if isinstance(error, PartitionsLost) else "aborted"
            log.warning("deadline misses not committed (%s: %s); deciding again", kind, error)
            self._stop.wait(0.1)  # not a busy loop while the group settles
            return
        with self.lock:
            for partition, event in decisions:
                fold = self.folds.get(partition)
                if fold is not None:
                    evolve(fold.state, event)
        called = [event for _partition, event in decisions if isinstance(event, CallbackCalled)]
        for event in called:
            self.in_flight.pop((event.dag_id, event.run_id, event.trigger, event.task_id), None)
            self.callbacks_called["ok" if event.ok else "failed"] += 1
            log.info("callback %s of %s / %s%s: %s after %d attempt(s) (%s)", event.trigger, event.dag_id,
                     event.run_id, f" / {event.task_id}" if event.task_id else "", "ok" if event.ok else "FAILED",
                     event.attempts, event.detail)
        misses = [(partition, event) for partition, event in decisions if not isinstance(event, CallbackCalled)]
        self.fired += len(misses)
        for _partition, event in misses:
            log.info("deadline missed: %s / %s%s (deadline %.3f, committed %.3f s after it)", event.dag_id,
                     event.run_id, f" / {event.task_id}" if hasattr(event, "task_id") else "", event.deadline,
                     time.time() - event.deadline)

    # -- ownership -----------------------------------------------------------------------------
    @property
    def _events_topic(self) -> str:
        return topic_name(self.settings.topic_prefix, EVENTS)

    def _assigned(self, assigned: list[tuple[str, int]]) -> None:
        """Called inside poll: take the new partitions over (a failed takeover is retried)."""
        partitions = sorted(partition for _topic, partition in assigned)
        if partitions:
            self._take_over(partitions)

    def _take_over(self, partitions: list[int]) -> None:
        """Wait out the previous owner's open transaction, replay, then read on from where replay ended."""
        started = time.time()
        client_id = f"tock-monitor-{self.monitor_id}"
        try:
            settle(self.settings, EVENTS, partitions, timeout=2 * self.settings.monitor_session_timeout + 10,
                   client_id=f"{client_id}-settle", group_id=self.group_id)
            folds = rebuild(self.settings, partitions, client_id)
        except Exception as error:  # noqa: BLE001 - any failure of a takeover is retried, said loudly
            self._takeover_failed(partitions, error)
            return
        for partition in partitions:
            self.unreplayed.pop(partition, None)
        with self.lock:
            self.folds.update(folds)
        self._unpark(partitions)
        parts = [TopicPartition(self._events_topic, partition, folds[partition].positions[EVENTS])
                 for partition in partitions]
        self.events.consumer.incremental_assign(parts)
        self.events.consumer.resume(parts)
        self._reassign_side()
        log.info("assigned partitions %s: replayed in %.3f s (%d open runs)", partitions, time.time() - started,
                 sum(len(fold.state.runs) for fold in folds.values()))

    def _takeover_failed(self, partitions: list[int], error: Exception) -> None:
        # Held assigned but paused (else the client reads them from the committed offsets, unreplayed).
        assigned = {(part.topic, part.partition) for part in self.events.consumer.assignment()}
        parts = [TopicPartition(self._events_topic, partition) for partition in partitions
                 if (self._events_topic, partition) not in assigned]
        if parts:
            self.events.consumer.incremental_assign(parts)
            self.events.consumer.pause(parts)
        now = time.time()
        for partition in partitions:
            _due, backoff = self.unreplayed.get(partition, (now, RETRY_FIRST / 2))
            self.unreplayed[partition] = (now + min(backoff * 2, RETRY_MOST), min(backoff * 2, RETRY_MOST))
        log.error("taking over partitions %s failed (%s); retrying", partitions, error)

    def _unpark(self, partitions: list[int]) -> None:
        assigned = {(part.topic, part.partition) for part in self.events.consumer.assignment()}
        parts = [TopicPartition(self._events_topic, partition) for partition in partitions
                 if (self._events_topic, partition) in assigned]
        if parts:
            self.events.consumer.incremental_unassign(parts)

    def _retry_takeovers(self) -> None:
        now = time.time()
        due = sorted(partition for partition, (when, _backoff) in self.unreplayed.items() if when <= now)
        if due:
            self._take_over(due)

    def _revoked(self, revoked: list[tuple[str, int]]) -> None:
        """Lost partitions: forget them (their new owner replays them)."""
        partitions = {partition for _topic, partition in revoked}
        with self.lock:
            for partition in partitions:
                self.folds.pop(partition, None)
                self.unreplayed.pop(partition, None)
            # Calls under way for lost partitions: their new owner calls again (at least once).
            self.in_flight = {key: call for key, call in self.in_flight.items() if call[0] not in partitions}
        self._reassign_side()
        log.info("revoked partitions %s", sorted(partitions))

    def _reassign_side(self) -> None:
        with self.lock:
            self.side.assign([(DAGS, partition, fold.positions[DAGS]) for partition, fold in sorted(self.folds.items())])
