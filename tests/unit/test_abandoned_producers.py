"""AbandonedProducers' bookkeeping (infra/log/abandoned.py), with stand-ins for librdkafka producers:
closed in the background, forgotten once closed, at most ``most`` still closing, stuck ones said
once, one whose call is still blocked closed only after that call returned. (The same against a
real broker that went away: tests/integration/test_abandoned_producers.py.)"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from infra.log.abandoned import AbandonedProducers


class StandInProducer:
    """Records purge and close; ``close`` waits for ``release`` when given one, or raises ``fails``."""

    def __init__(self, release: threading.Event | None = None, fails: Exception | None = None) -> None:
        self.release, self.fails = release, fails
        self.purged = self.closed = False
        self.closing = threading.Event()

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.purged = True

    def close(self) -> bool:
        self.closing.set()
        if self.release is not None:
            self.release.wait()
        if self.fails is not None:
            raise self.fails
        self.closed = True
        return True


def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_an_abandoned_producer_is_purged_closed_and_forgotten() -> None:
    book = AbandonedProducers("txn-a")
    producer = StandInProducer()
    book.abandon(producer, "wedged")
    until(lambda: book.closed == 1)
    assert producer.purged and producer.closed
    assert (book.abandoned, book.closing, book.full) == (1, 0, False)


def test_at_most_most_are_closing_and_then_the_book_is_full_until_one_closes() -> None:
    book = AbandonedProducers("txn-b", most=2)
    releases = [threading.Event(), threading.Event()]
    for release in releases:
        book.abandon(StandInProducer(release), "not ready")
    assert (book.closing, book.full) == (2, True)
    releases[0].set()
    until(lambda: book.closing == 1)
    assert not book.full
    releases[1].set()
    until(lambda: book.closing == 0)
    assert (book.abandoned, book.closed) == (2, 2)


def test_a_close_that_fails_drops_the_producer_all_the_same(caplog: pytest.LogCaptureFixture) -> None:
    book = AbandonedProducers("txn-c")
    with caplog.at_level(logging.WARNING, "tock.log"):
        book.abandon(StandInProducer(fails=RuntimeError("handle is broken")), "wedged")
        until(lambda: book.closed == 1)
    assert book.closing == 0
    assert "closing an abandoned producer failed (handle is broken); dropped" in caplog.text


def test_a_stuck_close_is_said_once_and_still_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    book = AbandonedProducers("txn-d", most=1, close_wait=30.0, clock=lambda: now[0])
    release = threading.Event()
    book.abandon(StandInProducer(release), "wedged")
    assert book.check_stuck() == []
    now[0] += 31.0
    with caplog.at_level(logging.ERROR, "tock.log"):
        assert len(book.check_stuck()) == 1
        assert book.check_stuck() == []  # said once
        assert book.full
    assert caplog.text.count("has not closed after 30 s") == 1
    release.set()
    until(lambda: book.closing == 0)
    assert not book.full


def test_a_producer_never_closing_is_given_up_as_lost_and_counts_no_more(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    book = AbandonedProducers("txn-f", most=1, close_wait=30.0, lost_after=600.0, clock=lambda: now[0])
    release = threading.Event()
    book.abandon(StandInProducer(release), "send_offsets_to_transaction blocked for good")
    now[0] = 100.0
    assert book.full
    now[0] = 601.0
    with caplog.at_level(logging.ERROR, "tock.log"):
        assert not book.full  # a new producer may be built: the session is never left without one
    assert (book.lost, book.closing) == (1, 1) and "given up as lost" in caplog.text
    release.set()  # should it return after all, it is closed and forgotten
    until(lambda: book.closing == 0)
    assert book.lost == 0


def test_a_producer_whose_call_is_still_blocked_is_purged_at_once_and_closed_only_after_the_call() -> None:
    book = AbandonedProducers("txn-e")
    blocked = threading.Event()
    producer = StandInProducer()
    book.abandon(producer, "send_offsets_to_transaction blocked", after=blocked)
    until(lambda: producer.purged)
    time.sleep(0.05)
    assert not producer.closing.is_set() and book.closing == 1
    blocked.set()
    until(lambda: book.closed == 1)
    assert producer.closed
