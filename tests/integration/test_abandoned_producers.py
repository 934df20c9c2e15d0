"""A transactional session through a broker outage keeps a bounded number of librdkafka producers.

Every commit while the broker is away gives up on the session's producer (its abort cannot reach
the coordinator, then each new producer cannot get ready). Each one used to be kept for ever in
``_abandoned``, with its librdkafka threads; now each is closed in the background and at most
ABANDONED_MOST are alive beside the current one (infra/log/abandoned.py). Counted here by
librdkafka's own main threads (``rdk:main``, one per client handle). A private broker, stopped
and started again, so the session's shared broker is never stopped under other tests.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from infra.broker import LocalKafkaBroker
from infra.log import TransactionAborted, TransactionalSession, replay
from infra.log.abandoned import ABANDONED_MOST
from infra.settings import load_settings
from infra.topics import ensure_topics
from schemas import EVENTS
from tests.integration.log_helpers import queued
from tests.scenarios.scheduler_support import free_port

pytestmark = [pytest.mark.integration, pytest.mark.apart]

FAILED_COMMITS = ABANDONED_MOST + 3


def librdkafka_handles() -> int:
    """Live librdkafka client handles of this process (each runs one thread named rdk:main)."""
    count = 0
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            count += comm.read_text().startswith("rdk:main")
        except OSError:
            pass  # a thread that just ended
    return count


def commit_once_ready(session: TransactionalSession, dag_id: str, timeout: float = 120.0) -> None:
    """Commit one event, trying again while the session aborts: a broker just started (or back) loads
    its transaction coordinator first (COORDINATOR_LOAD_IN_PROGRESS, longer than the session's 2 s
    timeout on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            session.commit([queued(dag_id)], None)
            return
        except TransactionAborted:
            assert time.monotonic() < deadline, f"no commit of {dag_id!r} within {timeout} s of the broker running"


def dag_ids_once_settled(settings, count: int, timeout: float = 60.0) -> list[str]:
    """The dag ids of the committed events, read again until ``count`` are there or the deadline: a
    commit returns once the coordinator decided it, and its markers reach the partitions a moment later
    (until then a read_committed replay stops at the last stable offset, below the records)."""
    deadline = time.monotonic() + timeout
    while True:
        dag_ids = sorted(record.event.dag_id for record in replay(settings, EVENTS))
        if len(dag_ids) >= count or time.monotonic() > deadline:
            return dag_ids
        time.sleep(0.2)


@pytest.fixture
def private_broker(tmp_path: Path):
    port = free_port()
    broker = LocalKafkaBroker(load_settings({
        "TOCK_HOME": str(tmp_path / "broker-home"), "TOCK_BROKER_PORT": str(port),
        "TOCK_CONTROLLER_PORT": str(free_port(port)), "TOCK_BROKER_HEAP": "256M"}))
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.timeout(300)
def test_failed_restarts_in_an_outage_keep_a_bounded_number_of_producers(make_settings, private_broker) -> None:
    settings = make_settings(kafka_bootstrap=private_broker.address)
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    before = librdkafka_handles()
    session = TransactionalSession(settings, f"{settings.topic_prefix}abandon", timeout=2.0)
    commit_once_ready(session, "before")

    private_broker.stop()
    most_alive = 0
    for _attempt in range(FAILED_COMMITS):
        with pytest.raises(TransactionAborted):
            session.commit([queued("during")], None)
        most_alive = max(most_alive, librdkafka_handles() - before)
    assert most_alive <= ABANDONED_MOST + 1, f"{most_alive} producers alive after {FAILED_COMMITS} failed commits"
    deadline = time.monotonic() + 30
    while session.abandoned.closing and time.monotonic() < deadline:
        time.sleep(0.1)
    alive_after = librdkafka_handles() - before
    assert session.abandoned.abandoned >= FAILED_COMMITS - 1  # the first commit wedged one, each restart one more
    assert (session.abandoned.closing, session.abandoned.closed) == (0, session.abandoned.abandoned)
    assert alive_after <= 1  # the session's current producer only

    private_broker.start()
    commit_once_ready(session, "after")
    session.close()
    assert dag_ids_once_settled(settings, 2) == ["after", "before"]


@pytest.mark.timeout(300)
def test_a_session_started_while_the_broker_is_away_waits_for_it_instead_of_stopping(make_settings,
                                                                                    private_broker) -> None:
    """A scheduler started during a broker restart used to exit 3 ('could not start: _TIMED_OUT', the
    soak's finding): an init that times out is no fencing. Now its commits abort until the broker is
    back, then one goes through."""
    settings = make_settings(kafka_bootstrap=private_broker.address)
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    private_broker.stop()
    session = TransactionalSession(settings, f"{settings.topic_prefix}late-start", timeout=2.0)
    with pytest.raises(TransactionAborted):
        session.commit([queued("during")], None)
    private_broker.start()
    commit_once_ready(session, "after")
    session.close()
    assert dag_ids_once_settled(settings, 1) == ["after"]
