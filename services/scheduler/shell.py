"""The scheduler's shell: poll the log, fold, decide, commit decisions with offsets, then launch.

Instances share one consumer group on tock.events; owning partition p means owning p of
tock.dags and tock.heartbeats too (read by assignment). Decisions and the consumed
offsets commit in one Kafka transaction bound to the group generation (KIP-447), so an
instance that lost p cannot commit anything for it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import TopicPartition

from infra.log import EventReader, PartitionsLost, RawRecord, TransactionAborted, TransactionalSession, partition_for
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES, topic_name
from schemas import (
    DAGS,
    EVENTS,
    HEARTBEATS,
    SNAPSHOTS,
    DagParsed,
    PauseDag,
    SchedulerHeartbeat,
    SchedulerStopped,
    TaskHeartbeat,
    TaskKillRequested,
    TaskLaunched,
)
from services.scheduler.core import Policy, decide, decide_adoption, next_wakeup, orphans, overdue_tries
from services.scheduler.core.model import DagTombstone
from services.scheduler.core.pods import try_has_ended, worth_writing
from services.scheduler.core.snapshot import snapshot_due
from services.scheduler.evidence import SLOW_CALL, HeartbeatEvidence
from services.scheduler.launching import Executor, Launcher
from services.scheduler.memory import PartitionMemory, logical_topics, snapshot_of
from services.scheduler.metrics import SchedulerMetrics, heartbeat_delay
from services.scheduler.takeover import BackgroundTakeovers, Takeover, TakeoverConfig

log = logging.getLogger("tock.scheduler")

MAX_POLL_WAIT = 0.2  # longest sleep between decisions when nothing arrives (timers, cron)
TAKEOVER_POLL_WAIT = 0.02  # ... while a takeover runs in the background: its result is installed by this loop
ASSIGNMENT = "cooperative-sticky"
TRANSACTION_RETRY_BACKOFF_MS = 5
SNAPSHOT_RECORD_OVERHEAD = 64 * 1024  # key and batch framing around a snapshot's value, kept under the limits
REPLAY_RETRY_FIRST, REPLAY_RETRY_MOST = 1.0, 30.0  # seconds between attempts at a failed takeover


def new_scheduler_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Scheduler:
    """One scheduler instance. ``run()`` until ``stop()`` (from a signal handler or another thread)."""

    def __init__(self, settings: Settings, executors: Mapping[str, Executor], *,
                 scheduler_id: str | None = None, metrics: SchedulerMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or SchedulerMetrics()
        self.scheduler_id = scheduler_id or new_scheduler_id()
        self.policy = Policy(self.scheduler_id, settings.task_heartbeat_timeout, settings.task_start_timeout)
        self.executors = executors
        self.launcher = Launcher(executors, settings.executor_parallelism, self.scheduler_id)
        self.memories: dict[int, PartitionMemory] = {}
        self.adoption_due: set[int] = set()
        self.full_walk: set[int] = set()
        self.retouched: dict[int, set] = {}  # runs our own committed decisions changed
        self.pending: list[tuple[int, object]] = []  # (partition, event) to commit next
        # Launching waits for proof that this instance still owns its partitions: a commit
        # in the current group generation. A PartitionsLost abort withdraws it.
        self.may_launch = True
        self.unreplayed: dict[int, tuple[float, float]] = {}  # partition -> (next attempt, backoff)
        self._stop = threading.Event()
        self._topics = logical_topics(settings)
        self.group_id = f"{settings.topic_prefix}tock-scheduler"
        self._next_heartbeat = 0.0
        self.assigned_at: dict[int, float] = {}  # when each partition was taken over (for benchmarks)
        self.takeovers = BackgroundTakeovers(TakeoverConfig(settings, self.group_id,
                                                            f"tock-scheduler-{self.scheduler_id}",
                                                            self._settle_timeout()))
        self._pods_written: set[tuple[str, str]] = set()  # (observation, pod uid) written already

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> None:
        """Join the group and schedule until stopped. Raises Fenced if this instance must not go on."""
        # A scheduler killed inside a transaction leaves it open, holding back read_committed readers
        # of its partitions until the coordinator aborts it: keep that wait as short as a takeover.
        # A transaction begun while the previous one's markers are still being written is told
        # CONCURRENT_TRANSACTIONS and retried after retry.backoff.ms: librdkafka's 100 ms default
        # cost a chain ~100 ms on one hop in four (backoff still grows to 1 s when the broker is away).
        self.session = TransactionalSession(
            self.settings, f"{self.settings.topic_prefix}tock-scheduler-{self.scheduler_id}",
            config={"transaction.timeout.ms": int(self.settings.scheduler_session_timeout * 1000),
                    "retry.backoff.ms": TRANSACTION_RETRY_BACKOFF_MS,
                    # A snapshot is one record of up to SNAPSHOT_MAX_BYTES (the topic allows as much).
                    "message.max.bytes": SNAPSHOT_MAX_BYTES})
        self.side = EventReader(self.settings, [], client_id=f"tock-scheduler-side-{self.scheduler_id}")
        self.events = EventReader(self.settings, [EVENTS], group_id=self.group_id,
                                  on_assign=self._assigned, on_revoke=self._revoked,
                                  client_id=f"tock-scheduler-{self.scheduler_id}",
                                  config=self._group_config())
        self.evidence = HeartbeatEvidence(self.side, topic_name(self.settings.topic_prefix, HEARTBEATS))
        self.snapshots_on = self._snapshot_topic_exists()
        self.takeovers.config = dataclasses.replace(self.takeovers.config, snapshots=self.snapshots_on)
        log.info("scheduler %s started", self.scheduler_id)
        try:
            while not self._stop.is_set():
                self.step()
            self._say_goodbye()
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def _say_goodbye(self) -> None:
        # Launches already made are committed with the goodbye, so the next owner sees their handles.
        goodbye = (None, SchedulerStopped(scheduler_id=self.scheduler_id, at=time.time()))
        try:
            snapshots = self._snapshots(sorted(self.memories) if self.snapshots_on else [])  # a fast restart
            self._commit_now(self.pending + [goodbye], snapshots)
        except TransactionAborted as error:  # e.g. the group rebalanced as we stopped: the next owner relaunches
            log.warning("stopping: the last decisions were not committed (%s); the runners' claims in the "
                        "log keep any try from running twice", error)

    def _group_config(self) -> dict:
        return {"partition.assignment.strategy": ASSIGNMENT,
                "session.timeout.ms": int(self.settings.scheduler_session_timeout * 1000),
                "heartbeat.interval.ms": int(self._group_heartbeat_interval() * 1000)}

    def _group_heartbeat_interval(self) -> float:
        return max(0.1, self.settings.scheduler_session_timeout / 5)

    def _ownership_window(self) -> float:
        """How long a commit may take and still prove this member owns its partitions. The group
        moves on a session timeout after the member's last heartbeat, which may have been sent up
        to a heartbeat interval (two, allowing one late) before the commit began."""
        return self.settings.scheduler_session_timeout - 2 * self._group_heartbeat_interval()

    def _close(self) -> None:
        for closing in (self.events.close, self.side.close, self.session.close):
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)
        for executor in self.executors.values():
            executor.close()
        log.info("scheduler %s stopped", self.scheduler_id)

    # -- one turn of the loop ------------------------------------------------------------------
    def step(self) -> None:
        """Poll, fold, decide, commit, then launch."""
        # Wait for the first record only, then take what is already there: consume() would
        # otherwise sit out the whole wait collecting a full batch.
        records = self.events.poll(self._poll_wait(), 1)
        records += self.events.poll(0, 5000) + self.side.poll(0, 5000)
        touched = self._fold(records)
        self._install_takeovers()
        self._retry_takeovers()
        now = time.time()
        self._gather_evidence(now)
        decisions = self._adoptions(now) + self._decisions(now, touched) + self._heartbeat(now)
        snapshots = self._snapshots_due(now)
        # A takeover is done when a commit carries its adoptions, even none: without that commit
        # the loop spun (no wait while adoptions are due) until some other decision came along.
        if decisions or self.pending or self.adoption_due or not self.may_launch or snapshots:
            self._commit(decisions, snapshots)
        if self.may_launch:
            self.pending.extend(self.launcher.launch_ready(self.memories.values()))
        self._tend_pods()
        self.metrics.follow_fold([memory.state for memory in self.memories.values()], self.executors)

    def _poll_wait(self) -> float:
        if self.pending or self.adoption_due or not self.may_launch:
            return 0.0
        now = time.time()
        wakeups = [wakeup for memory in self.memories.values()
                   if (wakeup := next_wakeup(memory.state, self.policy.heartbeat_timeout, now,
                                             self.policy.start_timeout)) is not None]
        wait = min(wakeups, default=now + MAX_POLL_WAIT) - now
        return min(max(wait, 0.0), TAKEOVER_POLL_WAIT if self.takeovers.under_way else MAX_POLL_WAIT)

    def _fold(self, records) -> dict[int, set | None]:
        """Fold records of owned partitions; returns the runs touched per partition (None: walk all)."""
        touched: dict[int, set | None] = {}
        for record in records:
            memory = self.memories.get(record.partition)
            if memory is None:
                continue  # not ours (any more)
            if isinstance(record.event, TaskHeartbeat):
                self._fold_heartbeat(memory, record)
                continue
            event = memory.fold_record(self._topics[record.topic], record)
            if event is None:
                continue
            runs = touched.setdefault(record.partition, set())
            if isinstance(event, DagParsed | DagTombstone | PauseDag) or runs is None:  # may concern every run
                touched[record.partition] = None
            elif hasattr(event, "run_id"):
                runs.add((event.dag_id, event.run_id))
        return touched

    def _fold_heartbeat(self, memory: PartitionMemory, record) -> None:
        """Fold a heartbeat, measuring how late it came after the try's previous one (or its start)."""
        beat = record.event
        instance = memory.state.instance((beat.dag_id, beat.run_id, beat.task_id))
        previous = None if instance is None else instance.last_heartbeat_at or instance.started_at
        memory.fold_record(self._topics[record.topic], record)
        if instance is not None and instance.last_heartbeat_at == beat.at:  # the current try's runner
            delay = heartbeat_delay(previous, beat.at, self.settings.task_heartbeat_seconds)
            if delay is not None:
                self.metrics.heartbeat_delay.observe(delay)

    def _decisions(self, now: float, touched: dict[int, set | None]) -> list[tuple[int, object]]:
        decisions = []
        for partition, memory in self.memories.items():
            walk = touched.get(partition, set())
            if partition in self.full_walk or walk is None:
                walk = None
            else:
                walk |= self.retouched.get(partition, set())
            evidence = None if partition in self.adoption_due else self.evidence.of(partition)
            decisions += [(partition, event) for event in decide(memory.state, now, self.policy, walk, evidence)]
        self.full_walk.clear()
        self.retouched.clear()
        return decisions

    def _gather_evidence(self, now: float) -> None:
        """For partitions with a try overdue by the clock, fetch the heartbeat log's end: once the
        reader has read up to it, the overdue tries may be declared dead (see evidence.py)."""
        timeout = self.policy.heartbeat_timeout
        for partition, memory in self.memories.items():
            self.evidence.read_up_to(partition, memory.positions[HEARTBEATS])
            if partition not in self.adoption_due and overdue_tries(memory.state, now, timeout,
                                                                    self.evidence.reachable_since,
                                                                    self.policy.start_timeout):
                self.evidence.request(partition)

    def _adoptions(self, now: float) -> list[tuple[int, object]]:
        """After a takeover: ask each orphan's executor (named by its TaskQueued) whether it lives.
        The partition stays in ``adoption_due`` (no try of it declared dead) until they commit."""
        decisions = []
        for partition in sorted(self.adoption_due):
            state = self.memories[partition].state
            alive = {orphan.key: self._probe(orphan.executor, orphan.handle)
                     for orphan in orphans(state, self.scheduler_id)}
            adopted = decide_adoption(state, now, self.scheduler_id, alive)
            log.info("partition %d: %d orphan(s), %d alive and adopted", partition, len(alive), len(adopted))
            decisions += [(partition, event) for event in adopted]
        return decisions

    # -- pods (executors that watch what they launched) -----------------------------------------
    def _watching_executors(self) -> list:
        return [executor for executor in self.executors.values() if hasattr(executor, "observations")]

    def _watch_owned(self) -> None:
        """Executors that watch their tries (Kubernetes) follow the partitions owned now, and only them."""
        for executor in self._watching_executors():
            executor.watch(sorted(self.memories))

    def _tend_pods(self) -> None:
        """Write what the watchers saw of the owned partitions' pods (once per pod), and delete the
        finished pods whose end is written and whose try's outcome is folded."""
        for executor in self._watching_executors():
            by_partition: dict[int, list] = {}
            for event in executor.observations():
                by_partition.setdefault(partition_for(event.dag_id, self.settings.partitions), []).append(event)
            for partition, observed in by_partition.items():
                memory = self.memories.get(partition)
                if memory is not None:
                    self.pending += [(partition, event) for event in
                                     worth_writing(memory.state, observed, self._pods_written)]
            executor.delete_finished([pod.name for pod in executor.finished_pods() if self._try_ended(pod.key)
                                      and ("PodFinished", pod.uid) in self._pods_written])

    def _try_ended(self, key: tuple[str, str, str, int]) -> bool:
        memory = self.memories.get(partition_for(key[0], self.settings.partitions))
        return memory is not None and try_has_ended(memory.state, key)

    def _probe(self, executor_name: str, handle: str) -> bool | None:
        executor = self.executors.get(executor_name)
        return None if executor is None or not handle else executor.is_alive(handle)

    def _heartbeat(self, now: float) -> list[tuple[int | None, object]]:
        if now < self._next_heartbeat:
            return []
        self._next_heartbeat = now + self.settings.task_heartbeat_seconds
        return [(None, SchedulerHeartbeat(scheduler_id=self.scheduler_id, hostname=self.settings.host,
                                          pid=os.getpid(), partitions=sorted(self.memories), at=now))]

    # -- committing ----------------------------------------------------------------------------
    def _commit(self, decisions: list, snapshots: list[int] = ()) -> None:
        batch = self.pending + decisions
        started = time.time()
        try:
            self._commit_now(batch, self._snapshots(snapshots))
        except TransactionAborted as error:
            self.metrics.aborted.inc()
            self._aborted(error)
            self._snapshots_put_off(snapshots)
            return
        finally:
            elapsed = time.time() - started
            if elapsed > SLOW_CALL:
                self.evidence.unreachable(time.time())
        self.metrics.commit_seconds.observe(elapsed)
        # A commit that outlasted the ownership window (this process was frozen, or the broker
        # away) proves nothing about today's ownership: the next commit must, before any launch.
        self.pending, self.may_launch = [], elapsed < self._ownership_window()
        self.adoption_due.clear()
        self._committed(batch)

    def _aborted(self, error: TransactionAborted) -> None:
        log.warning("decisions not committed (%s); deciding again", error)
        self.evidence.unreachable(time.time())
        # The lost decisions came from runs that no new event may touch again: walk all. Lost
        # adoptions are probed again (adoption_due is kept until a commit carries them).
        self.full_walk.update(self.memories)
        if isinstance(error, PartitionsLost):
            self.may_launch = False  # until a commit proves which partitions are still ours

    def _committed(self, batch: list) -> None:
        self.metrics.committed(event for _partition, event in batch)
        for partition, event in batch:
            memory = self.memories.get(partition) if partition is not None else None
            if memory is not None:
                memory.apply_decisions([event])
                if hasattr(event, "run_id"):  # walk the run again: e.g. a new run's roots are ready
                    self.retouched.setdefault(partition, set()).add((event.dag_id, event.run_id))
                if isinstance(event, TaskKillRequested):
                    self.launcher.kill_committed(memory, event)
        self.launcher.committed(event for _partition, event in batch if isinstance(event, TaskLaunched))

    def _commit_now(self, batch: list, snapshots: list[RawRecord] = ()) -> None:
        offsets = {(topic_name(self.settings.topic_prefix, EVENTS), partition): memory.positions[EVENTS]
                   for partition, memory in self.memories.items()}
        self.session.commit([event for _partition, event in batch], self.events, offsets, snapshots)
        for snapshot in snapshots:
            memory = self.memories.get(snapshot.partition)
            if memory is not None:
                memory.folded_since_snapshot, memory.snapshot_at = 0, time.time()

    # -- snapshots -----------------------------------------------------------------------------
    def _snapshot_topic_exists(self) -> bool:
        """Whether tock.snapshots exists: writing to a missing topic would abort every transaction
        (an upgrade that did not run `tock topics create`). Without it, no snapshots."""
        topic = topic_name(self.settings.topic_prefix, SNAPSHOTS)
        found = self.events.consumer.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            log.error("topic %s does not exist: no snapshots are written, every takeover replays the full "
                      "history (`tock topics create` creates it)", topic)
            return False
        return True

    def _snapshots_due(self, now: float) -> list[int]:
        if not self.snapshots_on:
            return []
        every = self.settings.scheduler_snapshot_every_events
        interval = self.settings.scheduler_snapshot_interval_seconds
        return [partition for partition, memory in self.memories.items()
                if partition not in self.adoption_due
                and snapshot_due(memory.folded_since_snapshot, now - memory.snapshot_at, every, interval)]

    def _snapshots_put_off(self, partitions: list[int]) -> None:
        """After an aborted transaction that carried snapshots, decide again without them: should the
        snapshot itself be what the broker refused, the decisions must not wait on it."""
        for partition in partitions:
            memory = self.memories.get(partition)
            if memory is not None:
                memory.folded_since_snapshot, memory.snapshot_at = 0, time.time()
        if partitions:
            log.warning("snapshots of partitions %s put off to their next turn", sorted(partitions))

    def _snapshots(self, partitions: list[int]) -> list[RawRecord]:
        """Snapshots of these partitions' memories as they are now: before the decisions of the
        transaction they go out in are folded (see memory.snapshot_of)."""
        records = []
        for partition in partitions:
            memory = self.memories[partition]
            started = time.process_time()
            value = snapshot_of(memory)
            self.metrics.snapshot_seconds.observe(time.process_time() - started)
            self.metrics.snapshot_bytes.observe(len(value))
            if len(value) > SNAPSHOT_MAX_BYTES - SNAPSHOT_RECORD_OVERHEAD:
                log.warning("partition %d: snapshot of %d bytes is over the limit of tock.snapshots (%d bytes a "
                            "record); not written (a takeover replays the full history)", partition, len(value),
                            SNAPSHOT_MAX_BYTES)
                memory.folded_since_snapshot, memory.snapshot_at = 0, time.time()
                continue
            records.append(RawRecord(SNAPSHOTS, partition, str(partition), value))
        return records

    # -- ownership -----------------------------------------------------------------------------
    def _assigned(self, assigned: list[tuple[str, int]]) -> None:
        """Called inside poll: park the new partitions and take them over in the background."""
        partitions = sorted(partition for _topic, partition in assigned)
        if partitions:
            self._park(partitions)
            self.takeovers.start(partitions)

    def _install_takeovers(self) -> None:
        for takeover in self.takeovers.finished():
            if takeover.error is not None:
                self._takeover_failed(takeover.partitions, takeover.error)
            else:
                self._take_over(takeover)

    def _take_over(self, takeover: Takeover) -> None:
        """Install the memories a background takeover rebuilt, then read on from where it ended."""
        partitions, memories = takeover.partitions, takeover.memories
        for partition in partitions:
            self.unreplayed.pop(partition, None)
            memories[partition].snapshot_at = time.time()
        self.memories.update(memories)
        self._unpark(partitions)
        parts = [TopicPartition(self._events_topic, partition, memories[partition].positions[EVENTS])
                 for partition in partitions]
        self.events.consumer.incremental_assign(parts)
        self.events.consumer.resume(parts)  # librdkafka keeps a parked partition's pause across re-assignment
        self._reassign_side()
        self._watch_owned()  # lists the new partitions' pods now: the adoption probes read that list
        self.evidence.assigned(partitions, time.time())
        self.adoption_due.update(partitions)
        self.full_walk.update(partitions)
        self.assigned_at.update(dict.fromkeys(partitions, takeover.started))
        self.metrics.replay_seconds.observe(takeover.replayed - takeover.settled)
        self.metrics.takeover_seconds.observe(time.time() - takeover.started)
        self.metrics.takeover_from_snapshot.inc(len(takeover.from_snapshot))
        log.info("assigned partitions %s: replayed in %.3f s (%.3f s of it waiting out open transactions, "
                 "%.3f s restoring snapshots of %s; %d open runs)", partitions, time.time() - takeover.started,
                 takeover.settled - takeover.started, takeover.restored - takeover.settled,
                 sorted(takeover.from_snapshot) or "none", sum(len(memory.state.runs) for memory in memories.values()))

    def _settle_timeout(self) -> float:
        # A previous owner's transaction lives at most its transaction timeout (its session
        # timeout); the coordinator then aborts it. Beyond a generous margin, try again later.
        return 2 * self.settings.scheduler_session_timeout + 10.0

    @property
    def _events_topic(self) -> str:
        return topic_name(self.settings.topic_prefix, EVENTS)

    def _park(self, partitions: list[int]) -> None:
        """Hold partitions being taken over, or whose takeover failed: assigned (else the client assigns
        them itself, from the committed offsets, once the callback returns) but paused until a takeover
        succeeds."""
        assigned = {(part.topic, part.partition) for part in self.events.consumer.assignment()}
        parts = [TopicPartition(self._events_topic, partition) for partition in partitions
                 if (self._events_topic, partition) not in assigned]
        if parts:
            self.events.consumer.incremental_assign(parts)
            self.events.consumer.pause(parts)

    def _unpark(self, partitions: list[int]) -> None:
        assigned = {(part.topic, part.partition) for part in self.events.consumer.assignment()}
        parts = [TopicPartition(self._events_topic, partition) for partition in partitions
                 if (self._events_topic, partition) in assigned]
        if parts:
            self.events.consumer.incremental_unassign(parts)

    def _takeover_failed(self, partitions: list[int], error: Exception) -> None:
        self._park(partitions)
        now = time.time()
        for partition in partitions:
            _due, backoff = self.unreplayed.get(partition, (now, REPLAY_RETRY_FIRST / 2))
            backoff = min(backoff * 2, REPLAY_RETRY_MOST)
            self.unreplayed[partition] = (now + backoff, backoff)
        log.error("taking over partitions %s failed (%s); retrying in %.0f s", partitions, error,
                  min(self.unreplayed[partition][1] for partition in partitions))

    def _retry_takeovers(self) -> None:
        now = time.time()
        due = sorted(partition for partition, (when, _backoff) in self.unreplayed.items()
                     if when <= now and partition not in self.takeovers.under_way)
        if due:
            self.takeovers.start(due)

    def _revoked(self, revoked: list[tuple[str, int]]) -> None:
        """Lost partitions: commit the launches already made for them while we still may, then
        forget them entirely (their new owner replays them)."""
        partitions = {partition for _topic, partition in revoked}
        self.takeovers.cancel(partitions)
        self._commit_launches_of(partitions)
        for partition in partitions:
            memory = self.memories.pop(partition, None)
            if memory is not None:
                self.launcher.forget(memory)
            self.adoption_due.discard(partition)
            self.unreplayed.pop(partition, None)
        self.evidence.revoked(sorted(partitions))
        self.pending = [(partition, event) for partition, event in self.pending if partition in self.memories
                        or partition is None]
        self._reassign_side()
        self._watch_owned()
        log.info("revoked partitions %s", sorted(partitions))

    def _commit_launches_of(self, partitions: set[int]) -> None:
        # A revocation is the member's last moment in the generation: its TaskLaunched records
        # (the handles of processes already started) go out now, or the new owner launches again.
        if not any(partition in partitions for partition, _event in self.pending):
            return
        try:
            self._commit_now(self.pending)
        except TransactionAborted as error:
            log.warning("launches of revoked partitions not committed (%s); their new owner finds the "
                        "tries queued and the runners' claims in the log", error)
            return
        self._committed(self.pending)
        self.pending = []

    def _reassign_side(self) -> None:
        self.side.assign([(logical, partition, memory.positions[logical])
                          for partition, memory in sorted(self.memories.items()) for logical in (DAGS, HEARTBEATS)])
