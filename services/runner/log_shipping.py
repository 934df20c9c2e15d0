"""LogShipping: a runner's thread that ships its tries' log lines to ``tock.logs`` while they run.

Every TICK_SECONDS it reads what each try's log file gained and produces the chunks that
log_chunks.plan_chunks says to ship, with a plain idempotent producer that never gives up
on a record (a broker outage delays lines, it loses none within the budget). It only
reads files the user code writes: it can neither block nor kill the user code, and
trouble of its own is logged, never raised into the runner.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import BinaryIO

from infra.executors.requests import TryRequest
from infra.log import KafkaEventLog
from infra.settings import Settings
from schemas import TaskLogShipped
from services.runner.core.claim import TryKey
from services.runner.every import Every
from services.runner.log_chunks import Budget, Chunk, ShipState, plan_chunks

log = logging.getLogger("tock.runner")

TICK_SECONDS = 0.05
READ_LIMIT = 1 << 20  # bytes read from one file per tick at most, so every try gets its turn
# Never drop a line: the producer retries until the broker is back (the runner's final flush is bounded).
LOG_PRODUCER = {"message.timeout.ms": 0}


FLUSH_SECONDS = 10.0  # how long a runner waits at its end for its log lines' acknowledgements


def log_producer(settings: Settings) -> KafkaEventLog:
    return KafkaEventLog(settings, client_id="tock-runner-logs", config=LOG_PRODUCER)


def close_log_producer(producer: KafkaEventLog, flush_seconds: float = FLUSH_SECONDS) -> None:
    """Wait up to ``flush_seconds`` for the log lines' acknowledgements, then close: a broker away
    longer costs the topic those lines (each try's log file keeps them), never the runner its end."""
    remaining = producer.producer.flush(flush_seconds)
    if remaining:
        log.warning("%d log record(s) of this runner's tries not acknowledged after %g s (broker away?); "
                    "the tries' log files keep every line", remaining, flush_seconds)
        producer.producer.purge()
    producer.producer.close()


@dataclass(slots=True)
class _Tail:
    request: TryRequest
    path: str
    runner_id: str
    budget: Budget
    state: ShipState
    file: BinaryIO | None = None
    ended: bool = False


class LogShipping:
    """Ships the log of each try it is told to ``follow`` until that try has ``ended``; ``close`` ships
    what is left and waits a bounded time for the broker to acknowledge it."""

    def __init__(self, settings: Settings, producer: KafkaEventLog) -> None:
        self.settings, self.producer = settings, producer
        self._tails: dict[TryKey, _Tail] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._trouble = Every(10.0, now=True)
        self._thread = threading.Thread(target=self._run, name="tock-log-shipping", daemon=True)
        self._thread.start()

    def follow(self, request: TryRequest, path: str, runner_id: str) -> None:
        budget = Budget(self.settings.task_log_ship_limit_bytes, f"{self.settings.host}:{path}")
        with self._lock:
            self._tails[request.key] = _Tail(request, path, runner_id, budget, ShipState())

    def ended(self, key: TryKey) -> None:
        """The try's user code has ended: its file is complete; the next pass ships its end."""
        with self._lock:
            if key in self._tails:
                self._tails[key].ended = True

    def close(self, timeout: float = FLUSH_SECONDS) -> None:
        """Ship every ended try's rest (queued in the producer: the runner flushes it at its very end,
        after its outcomes, see close_log_producer)."""
        self._stopping.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("log shipping still busy after %g s; leaving it", timeout)

    def _run(self) -> None:
        while not self._stopping.wait(TICK_SECONDS):
            self._ship_all()
        # Closing: ship what is left, READ_LIMIT at a time, until every try is done or nothing moves
        # (a try that wrote megabytes in its last moments has more than one pass left).
        while self._tails and self._ship_all():
            pass

    def _progress(self) -> tuple:
        with self._lock:
            return tuple((tail.state.offset, len(tail.state.pending), tail.state.done) for tail in self._tails.values())

    def _ship_all(self) -> bool:
        """One pass over the tries; whether it moved anything."""
        before = self._progress()
        with self._lock:
            tails = list(self._tails.values())
        for tail in tails:
            try:
                self._ship(tail)
            except Exception as error:  # noqa: BLE001 - shipping trouble never ends the runner
                if self._trouble.due():
                    log.warning("shipping the log of %s: %s; retrying", tail.path, error)
        with self._lock:
            for tail in [tail for tail in tails if tail.state.done]:
                self._tails.pop(tail.request.key, None)
                if tail.file is not None:
                    tail.file.close()
        return self._progress() != before

    def _ship(self, tail: _Tail) -> None:
        ended = tail.ended  # read first: once ended, the file read below is complete
        data = _read_more(tail)
        state, chunks = plan_chunks(tail.state, data, ended and len(data) < READ_LIMIT, tail.budget)
        try:
            for chunk in chunks:
                self.producer.append(_record(tail, chunk))
        except BaseException:
            # Read again next time; a chunk produced twice is dropped by readers (same offset).
            if tail.file is not None:
                tail.file.seek(tail.state.offset + len(tail.state.pending))
            raise
        tail.state = state


def _read_more(tail: _Tail) -> bytes:
    """What the file gained since the last read (it may not exist yet: the child creates it)."""
    if tail.state.done:
        return b""
    if tail.file is None:
        try:
            tail.file = open(tail.path, "rb")  # noqa: SIM115 - kept open across ticks
        except FileNotFoundError:
            return b""
        tail.file.seek(tail.state.offset + len(tail.state.pending))
    return tail.file.read(READ_LIMIT)


def _record(tail: _Tail, chunk: Chunk) -> TaskLogShipped:
    request = tail.request
    return TaskLogShipped(dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id,
                          map_index=request.map_index, try_number=request.try_number, runner_id=tail.runner_id,
                          offset=chunk.offset, text=chunk.text, truncated=chunk.truncated, final=chunk.final,
                          at=time.time())
