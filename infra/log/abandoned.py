"""AbandonedProducers: the transactional producers a session gave up on, closed in the background.

A TransactionalSession replaces its producer when a librdkafka call blocks past its timeout
(librdkafka #5456, #5511) or a new one cannot get ready while the brokers are away; during an
outage that is one producer per failed commit. Each holds librdkafka's threads, sockets and
buffers until it is closed, and closing one may block as long as the call that wedged it, so
never on the caller's thread: each is closed on a thread of its own. One whose close has not
returned after ``close_wait`` is said to be stuck (logged once) and still counted; one whose
librdkafka call is still blocked is closed only once that call has returned (destroying a handle
under a call in progress is not safe), purged at once so it stops retrying meanwhile. While
``most`` are still closing, ``full`` is true and the session builds no other producer (its
commit is aborted, and tried again later), so at most ``most`` + 1 producers of a session are
alive at any time. A closed producer is forgotten.

One exception, so that a session is never left without a producer for good: a producer still
not closed after ``lost_after`` is given up as lost (logged as an error: a librdkafka call that
never returns, librdkafka #5456, and nothing short of a restart frees it) and counts no more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger("tock.log")

ABANDONED_MOST = 4  # producers of one session still closing, at most
CLOSE_WAIT = 30.0   # seconds a close may take before it is said to be stuck
LOST_AFTER = 600.0  # seconds after which a producer still not closed no longer counts (see above)


class Closable(Protocol):
    """What is asked of a producer being abandoned (confluent_kafka.Producer has both)."""

    def purge(self, in_queue: bool = ..., in_flight: bool = ..., blocking: bool = ...) -> None: ...

    def close(self) -> object: ...


@dataclass
class AbandonedProducers:
    """Producers being closed, on threads of their own; ``name`` says whose in the log."""

    name: str
    most: int = ABANDONED_MOST
    close_wait: float = CLOSE_WAIT
    lost_after: float = LOST_AFTER
    clock: Callable[[], float] = time.monotonic
    abandoned: int = 0  # producers abandoned in all
    closed: int = 0     # of which closed
    _closing: dict[int, tuple[Closable, float]] = field(default_factory=dict)  # id -> producer, when abandoned
    _stuck: set[int] = field(default_factory=set)
    _lost: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def closing(self) -> int:
        """Producers whose close has not returned yet."""
        with self._lock:
            return len(self._closing)

    @property
    def lost(self) -> int:
        """Producers given up as lost (still not closed after ``lost_after``)."""
        with self._lock:
            return len(self._lost)

    @property
    def full(self) -> bool:
        """Whether ``most`` are still closing (the lost not counted): build no other producer until one
        is closed."""
        self.check_stuck()
        with self._lock:
            return len(self._closing) - len(self._lost) >= self.most

    def abandon(self, producer: Closable, why: str, after: threading.Event | None = None) -> None:
        """Stop the producer's retries and close it on a thread of its own, once ``after`` is set (the
        end of a librdkafka call of it still blocked) if given."""
        key = id(producer)
        with self._lock:
            self._closing[key] = (producer, self.clock())
            self.abandoned += 1
            closing = len(self._closing)
        log.warning("%s: producer abandoned (%s); closing it in the background (%d closing, at most %d)",
                    self.name, why, closing, self.most)
        threading.Thread(target=self._close, args=(key, producer, after), name=f"close-{self.name}",
                         daemon=True).start()

    def check_stuck(self) -> list[int]:
        """Log, once each, the producers whose close has taken over ``close_wait`` (their keys are
        returned), and those given up as lost after ``lost_after``."""
        now = self.clock()
        with self._lock:
            late = [key for key, (_producer, since) in self._closing.items()
                    if now - since > self.close_wait and key not in self._stuck]
            lost = [key for key, (_producer, since) in self._closing.items()
                    if now - since > self.lost_after and key not in self._lost]
            self._stuck.update(late)
            self._lost.update(lost)
            closing = len(self._closing)
        for _key in late:
            log.error("%s: an abandoned producer has not closed after %.0f s (librdkafka blocked); it stays "
                      "counted (%d closing, at most %d)", self.name, self.close_wait, closing, self.most)
        for _key in lost:
            log.error("%s: an abandoned producer has not closed after %.0f s: given up as lost (it keeps its "
                      "librdkafka threads until the process restarts), no longer counted", self.name,
                      self.lost_after)
        return late

    def _close(self, key: int, producer: Closable, after: threading.Event | None) -> None:
        started = self.clock()
        try:
            producer.purge(in_queue=True, in_flight=True, blocking=False)  # nothing left to send or retry
        except Exception as error:  # noqa: BLE001 - a broken producer is closed all the same
            log.debug("%s: purging an abandoned producer: %s", self.name, error)
        if after is not None:
            after.wait()
        try:
            producer.close()
        except Exception as error:  # noqa: BLE001 - said, and the producer is dropped all the same
            log.warning("%s: closing an abandoned producer failed (%s); dropped", self.name, error)
        with self._lock:
            self._closing.pop(key, None)
            was_stuck = key in self._stuck
            self._stuck.discard(key)
            self._lost.discard(key)
            self.closed += 1
        log.info("%s: abandoned producer closed after %.1f s%s", self.name, self.clock() - started,
                 " (it had been stuck)" if was_stuck else "")
