"""The Kafka clients of one scheduler instance: its transactional session, its group consumer of
tock.events, and the side reader of the other topics of the partitions it owns."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from infra.log import EventReader, TransactionalSession
from infra.log.reader import PartitionsCallback
from infra.settings import Settings
from infra.topics import SNAPSHOT_MAX_BYTES, topic_name
from schemas import EVENTS

log = logging.getLogger("tock.scheduler")

ASSIGNMENT = "cooperative-sticky"
TRANSACTION_RETRY_BACKOFF_MS = 5


def group_heartbeat_interval(settings: Settings) -> float:
    return max(0.1, settings.scheduler_session_timeout / 5)


def ownership_window(settings: Settings) -> float:
    """How long a commit may take and still prove this member owns its partitions. The group
    moves on a session timeout after the member's last heartbeat, which may have been sent up
    to a heartbeat interval (two, allowing one late) before the commit began."""
    return settings.scheduler_session_timeout - 2 * group_heartbeat_interval(settings)


def group_config(settings: Settings) -> dict[str, Any]:
    return {"partition.assignment.strategy": ASSIGNMENT,
            "session.timeout.ms": int(settings.scheduler_session_timeout * 1000),
            "heartbeat.interval.ms": int(group_heartbeat_interval(settings) * 1000)}


@dataclass(frozen=True)
class SchedulerClients:
    session: TransactionalSession
    events: EventReader  # the group member: tock.events of the partitions owned
    side: EventReader    # tock.dags and tock.heartbeats of those partitions, by assignment
    events_topic: str    # the real name of tock.events
    ownership_window: float  # see ownership_window()

    def close(self) -> None:
        for closing in (self.events.close, self.side.close, self.session.close):
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)


def connect(settings: Settings, scheduler_id: str, group_id: str, on_assign: PartitionsCallback,
            on_revoke: PartitionsCallback) -> SchedulerClients:
    """Start the session and join the group (the callbacks are called inside the consumer's poll)."""
    # A scheduler killed inside a transaction leaves it open, holding back read_committed readers
    # of its partitions until the coordinator aborts it: keep that wait as short as a takeover.
    # A transaction begun while the previous one's markers are still being written is told
    # CONCURRENT_TRANSACTIONS and retried after retry.backoff.ms: librdkafka's 100 ms default
    # cost a chain ~100 ms on one hop in four (backoff still grows to 1 s when the broker is away).
    session = TransactionalSession(
        settings, f"{settings.topic_prefix}tock-scheduler-{scheduler_id}",
        config={"transaction.timeout.ms": int(settings.scheduler_session_timeout * 1000),
                "retry.backoff.ms": TRANSACTION_RETRY_BACKOFF_MS,
                # A snapshot is one record of up to SNAPSHOT_MAX_BYTES (the topic allows as much).
                "message.max.bytes": SNAPSHOT_MAX_BYTES})
    side = EventReader(settings, [], client_id=f"tock-scheduler-side-{scheduler_id}")
    events = EventReader(settings, [EVENTS], group_id=group_id, on_assign=on_assign, on_revoke=on_revoke,
                         client_id=f"tock-scheduler-{scheduler_id}", config=group_config(settings))
    return SchedulerClients(session, events, side, topic_name(settings.topic_prefix, EVENTS),
                            ownership_window(settings))
