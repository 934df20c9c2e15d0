"""Committing batches through database outages and bad records (the projector's shell).

A database that is unreachable (or locked) is retried with backoff and nothing advances
meanwhile. A batch the database refuses for its data (e.g. a value PostgreSQL cannot
store) is retried record by record, and the records that still fail are dead-lettered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from infra.log import DeadLetterQueue
from infra.settings import Settings
from projections.records import Record
from projections.tables import LIVE, Tables
from projections.writer import Positions, commit_batch
from schemas import encode

log = logging.getLogger("tock.projector")
T = TypeVar("T")


class Stopped(Exception):
    """Asked to stop while waiting for the database."""


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.2
    maximum: float = 5.0


class BatchCommitter:
    """Commits batches with :func:`commit_batch`, retrying outages and dead-lettering bad records."""

    def __init__(self, settings: Settings, engine: Engine, stop: threading.Event, *,
                 tables: Tables = LIVE, backoff: Backoff = Backoff()) -> None:
        self._settings, self._engine, self._stop = settings, engine, stop
        self._tables, self._backoff = tables, backoff
        self._dead_letters = DeadLetterQueue(settings, "tock-projector")  # its producer starts on first use

    def commit(self, records: list[Record], start: Positions, end: Positions) -> int:
        """Commit one batch; returns records applied. Raises Stopped, OffsetsMoved."""
        try:
            return self._retrying(records, start, end)
        except DBAPIError as error:
            if _is_outage(error):
                raise
            log.warning("batch refused by the database (%s); applying its records one by one", error.orig)
            return self._one_by_one(records, end)

    def close(self) -> None:
        self._dead_letters.close()

    def _retrying(self, records: list[Record], start: Positions, end: Positions) -> int:
        return retry_outages(lambda: commit_batch(self._engine, records, start, end, self.dead_letter,
                                                  self._tables), self._stop, self._backoff)

    def _one_by_one(self, records: list[Record], end: Positions) -> int:
        applied = 0
        for record in records:
            position = {(record.topic, record.partition): record.offset + 1}
            try:
                applied += self._retrying([record], {}, position)
            except DBAPIError as error:
                if _is_outage(error):
                    raise
                self.dead_letter(record, f"database refused {type(record.event).__name__}: {error.orig}")
                self._retrying([], {}, position)
        self._retrying([], {}, end)
        return applied

    def dead_letter(self, record: Record, reason: str) -> None:
        """Write a record that cannot be applied to tock.dead-letter (durably) with the reason."""
        value = None if record.event is None else encode(record.event)
        self._dead_letters.send_value(value, record.key, record.topic, record.partition, record.offset, reason)
        self._dead_letters.flush()


def retry_outages(operation: Callable[[], T], stop: threading.Event, backoff: Backoff = Backoff()) -> T:
    """Run ``operation`` until the database answers; raise Stopped if asked to stop meanwhile."""
    delay = backoff.initial
    while True:
        try:
            return operation()
        except DBAPIError as error:
            if not _is_outage(error):
                raise
            reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
            log.warning("database unavailable (%s); nothing advanced, retrying in %.1fs", reason, delay)
        if stop.wait(delay):
            raise Stopped()
        delay = min(delay * 2, backoff.maximum)


def _is_outage(error: DBAPIError) -> bool:
    return isinstance(error, (OperationalError, InterfaceError)) or error.connection_invalidated
