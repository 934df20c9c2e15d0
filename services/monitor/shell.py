"""The monitor's shell: own partitions of tock.events, replay them, fold, decide deadline misses,
commit them with the consumed offsets, and serve the windowed tables over HTTP.

Exactly one DeadlineMissed per run (and one TaskDeadlineMissed per task instance: the same rules), through the log:

* Monitors share one consumer group (``<prefix>tock-monitor``) on tock.events, so each
  partition (= each DAG, see infra/log/partitioner.py) has one owner at a time.
* On being assigned a partition, a monitor parks it and takes it over in the background
  (services/monitor/takeovers.py; the rebalance callback never waits): it waits out any
  transaction a previous owner left open (``settle``), restores the partition's latest
  snapshot (services/monitor/snapshots.py) and replays tock.dags and tock.events from the
  offsets the snapshot covers (from offset 0 without one) up to their end. Only then does
  it decide: it has seen every DeadlineMissed that any earlier owner (another monitor, or
  its own previous life before a ``kill -9``) committed. A folded DeadlineMissed marks its
  run as done.
* Every so often (TOCK_MONITOR_SNAPSHOT_*) a partition's fold goes to tock.snapshots in a
  transaction with the offsets it covers, so a takeover replays only what follows it.
* Its DeadlineMissed events are written in a Kafka transaction that also commits its
  consumed offsets with its consumer-group metadata (KIP-447). A monitor that lost the
  partition in a rebalance (frozen, partitioned away) cannot commit: its transaction is
  aborted, so read_committed readers, the next owner included, never see its decision.
* A committed decision is folded when it is read back, in its place in the log (the fold is
  what any replay folds: folding at commit counted the monitor's own misses twice in its
  statistics); until then its partition is unsettled and nothing more is decided for it, so
  the owner never decides it twice (infra/log/read_back.py).

Callbacks (a DAG's ``on_failure`` / ``on_deadline_missed``: webhook URLs, or ``module:function``
paths run in a subprocess with a timeout; and Airflow's task and DAG ``on_*_callback`` functions,
services/monitor/core/task_callbacks.py) are called by the owner of the DAG's partition, on
worker threads (infra/callbacks.py: retried with backoff), and each
call sequence ends with a CallbackCalled committed like a miss; the log settles it. A monitor
that dies or loses the partition between the call and that commit leaves it owed, and the
next owner calls again: callbacks are at least once (a receiver may dedupe on dag_id, run_id,
trigger and, for a task instance's, task_id and try_number, which the payload carries).

Why not faust-streaming: faust 0.15.3 (aiokafka 0.14) does join a consumer group on this
Kafka 4.1 broker, but aiokafka has no KIP-447 transactional offset commits, so a monitor
that lost its partitions could still write a DeadlineMissed the next owner also writes;
DESIGN.md keeps confluent-kafka transactions for that reason. The state is the core's
fold held in memory, rebuilt on every assignment from its snapshot and the log after it
(no changelog topics: nothing beyond Tock's own topics must exist).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TypeAlias

from infra.callbacks import CallbackCaller
from infra.log import EventReader, PartitionsLost, RawRecord, TransactionAborted, TransactionalSession
from infra.log.ownership import ConsumerOwnership, OwnershipTopics
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES, topic_exists, topic_name
from schemas import DAGS, EVENTS, SNAPSHOTS, CallbackCalled, DeadlineMissed, TaskDeadlineMissed
from services.monitor.callbacks import CallbackCalls
from services.monitor.core import decide, due_notifications, next_deadline
from services.monitor.folds import HeldFolds, PartitionFold, rebuild
from services.monitor.snapshots import MonitorSnapshots
from services.monitor.takeovers import MonitorTakeovers, TakeoverConfig, TakeoverCounts

__all__ = ["Monitor", "PartitionFold", "new_monitor_id", "rebuild"]

log = logging.getLogger("tock.monitor")

MAX_POLL_WAIT = 0.2
ASSIGNMENT = "cooperative-sticky"

Decision: TypeAlias = tuple[int, DeadlineMissed | TaskDeadlineMissed | CallbackCalled]  # (partition, event)


def new_monitor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Monitor:
    """One monitor instance. ``run()`` until ``stop()`` (from a signal handler or another thread)."""

    def __init__(self, settings: Settings, *, monitor_id: str | None = None) -> None:
        self.settings = settings
        self.monitor_id = monitor_id or new_monitor_id()
        self.group_id = f"{settings.topic_prefix}tock-monitor"
        self.held = HeldFolds()
        self.fired = 0  # DeadlineMissed committed by this instance
        self.callbacks_called = {"ok": 0, "failed": 0}  # CallbackCalled committed by this instance
        self.turns = 0  # of the loop (it goes on while takeovers run in the background)
        self.taken_over = TakeoverCounts()
        self._stop = threading.Event()
        self._topics = {topic_name(settings.topic_prefix, logical): logical for logical in (DAGS, EVENTS)}

    @property
    def folds(self) -> dict[int, PartitionFold]:
        return self.held.folds

    @property
    def lock(self) -> threading.Lock:
        """Guards ``folds`` against the HTTP thread."""
        return self.held.lock

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> None:
        """Join the group and monitor until stopped. Raises Fenced if this instance must not go on."""
        timeout_ms = int(self.settings.monitor_session_timeout * 1000)
        # A snapshot is one record of up to SNAPSHOT_MAX_BYTES (the topic allows as much).
        self.session = TransactionalSession(
            self.settings, f"{self.settings.topic_prefix}tock-monitor-{self.monitor_id}",
            config={"transaction.timeout.ms": timeout_ms, "message.max.bytes": SNAPSHOT_MAX_BYTES})
        self.calls = CallbackCalls(CallbackCaller(callable_timeout=self.settings.monitor_callback_timeout),
                                   self.callbacks_called)
        self.side = EventReader(self.settings, [], client_id=f"tock-monitor-side-{self.monitor_id}")
        self.events = EventReader(self.settings, [EVENTS], group_id=self.group_id, on_assign=self._assigned,
                                  on_revoke=self._revoked, client_id=f"tock-monitor-{self.monitor_id}",
                                  config={"partition.assignment.strategy": ASSIGNMENT,
                                          "session.timeout.ms": timeout_ms,
                                          "heartbeat.interval.ms": max(100, timeout_ms // 5)})
        ownership = ConsumerOwnership(self.events, self.side, OwnershipTopics(self.settings.topic_prefix, EVENTS,
                                                                              (DAGS,)))
        snapshots_on = topic_exists(self.events.consumer, self.settings.topic_prefix, SNAPSHOTS, "monitor")
        self.snapshots = MonitorSnapshots(self.settings, self.held, on=snapshots_on)
        self.takeovers = MonitorTakeovers(TakeoverConfig(self.settings, self.group_id,
                                                         f"tock-monitor-{self.monitor_id}", snapshots_on),
                                          ownership, self.held, self.calls, self.taken_over)
        log.info("monitor %s started", self.monitor_id)
        try:
            while not self._stop.is_set():
                self.step()
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def _close(self) -> None:
        for closing in (self.events.close, self.side.close, self.session.close, self.calls.close):
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)
        log.info("monitor %s stopped (%d deadline misses written)", self.monitor_id, self.fired)

    # -- one turn of the loop ------------------------------------------------------------------
    def step(self) -> None:
        """Poll, fold, decide for the settled partitions, commit (our decisions are folded when read back)."""
        records = self.events.poll(self._poll_wait(), 1)
        records += self.events.poll(0, 5000) + self.side.poll(0, 5000)
        self.turns += 1
        self.takeovers.install_finished()
        self.takeovers.retry_due()
        now = time.time()
        with self.lock:
            for record in records:
                fold = self.folds.get(record.partition)
                if fold is not None:  # else: not ours (any more)
                    fold.fold_record(self._topics[record.topic], record)
            # Only settled partitions (our decisions read back and folded): else a miss or a call
            # decided last turn and not folded yet would be decided again.
            settled = {partition: fold for partition, fold in self.folds.items() if fold.awaiting.settled(now)}
            decisions: list[Decision] = [(partition, event) for partition, fold in settled.items()
                                         for event in decide(fold.state, now)]
            owed = [(partition, notification) for partition, fold in settled.items()
                    for notification in due_notifications(fold.state.notifications)]
            # The folds as they are before this turn's decisions (those go out after their offsets).
            snapshots = self.snapshots.records(self.snapshots.due(now))
        self.calls.call_back(owed)
        decisions += self.calls.ended(now)
        if decisions or snapshots:
            self._commit(decisions, snapshots)

    def _poll_wait(self) -> float:
        with self.lock:
            soonest = min((next_deadline(fold.state) for fold in self.folds.values()), default=float("inf"))
        return min(max(soonest - time.time(), 0.0), MAX_POLL_WAIT)

    def _commit(self, decisions: list[Decision], snapshots: list[RawRecord]) -> None:
        offsets = {(topic_name(self.settings.topic_prefix, EVENTS), partition): fold.positions[EVENTS]
                   for partition, fold in self.folds.items()}
        try:
            self.session.commit([event for _partition, event in decisions], self.events, offsets, raw=snapshots)
        except TransactionAborted as error:
            kind = "partitions moved" if isinstance(error, PartitionsLost) else "aborted"
            log.warning("deadline misses and snapshots not committed (%s: %s); deciding again", kind, error)
            with self.lock:
                self.snapshots.restart([record.partition for record in snapshots])  # put off to their next turn
            self._stop.wait(0.1)  # not a busy loop while the group settles
            return
        with self.lock:
            self.snapshots.restart([record.partition for record in snapshots])
            for partition, event in decisions:  # folded once read back, in their place in the log
                fold = self.folds.get(partition)
                if fold is not None:
                    fold.awaiting.committed([event], time.time())
        self.calls.committed(event for _partition, event in decisions if isinstance(event, CallbackCalled))
        misses = [event for _partition, event in decisions if not isinstance(event, CallbackCalled)]
        self.fired += len(misses)
        for event in misses:
            log.info("deadline missed: %s / %s%s (deadline %.3f, committed %.3f s after it)", event.dag_id,
                     event.run_id, f" / {event.task_id}" if isinstance(event, TaskDeadlineMissed) else "",
                     event.deadline, time.time() - event.deadline)

    # -- the group's callbacks (inside poll) -----------------------------------------------------
    def _assigned(self, assigned: list[tuple[str, int]]) -> None:
        self.takeovers.assigned(assigned)

    def _revoked(self, revoked: list[tuple[str, int]]) -> None:
        self.takeovers.revoked(revoked)
