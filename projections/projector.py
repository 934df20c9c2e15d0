"""``tock projector``: folds every Tock topic into the SQL tables, batch by batch.

It reads read_committed from the offsets stored in the database (never Kafka's committed
offsets), so a restart resumes exactly where the committed tables end. Each batch's rows
and offsets commit in one transaction (see ``projections.writer``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine

from infra.log import EventReader
from infra.settings import Settings
from infra.topics import topic_name
from projections.committer import BatchCommitter, Stopped, retry_outages
from projections.contract.views import create_views
from projections.db import create_tables, open_engine, schema_problems
from projections.metrics import ProjectorMetrics
from projections.records import logical_topic
from projections.tables import LIVE, Tables
from projections.writer import OffsetsMoved, Positions, stored_offsets
from schemas import DAGS, EVENTS, HEARTBEATS, PARSING, SCHEDULERS, USERS

log = logging.getLogger("tock.projector")

PROJECTED_TOPICS = (EVENTS, HEARTBEATS, DAGS, PARSING, SCHEDULERS, USERS)
LAG_EVERY = 1.0  # seconds between lag measurements


def projected_partitions(settings: Settings) -> list[tuple[str, int]]:
    """(real topic, partition) of every partition the projector folds."""
    return [(topic_name(settings.topic_prefix, logical), partition)
            for logical in PROJECTED_TOPICS for partition in range(settings.partitions)]


@dataclass(frozen=True)
class BatchLimits:
    """How a batch forms: what has arrived, up to ``records``, waiting ``linger`` seconds for more.

    The reader wakes on the first record (waiting up to ``idle_poll``) and takes whatever is
    fetched already; while more keeps arriving (the projector is behind) the batch grows, so
    a quiet stream commits at once and a busy one in large batches. ``linger`` > 0 trades
    lag for larger batches under a light load.
    """

    records: int = 20_000
    linger: float = 0.0
    idle_poll: float = 0.2


class Projector:
    """The projector's loop around one reader, one committer and the live tables."""

    def __init__(self, settings: Settings, engine: Engine, stop: threading.Event, *,
                 limits: BatchLimits = BatchLimits(), tables: Tables = LIVE,
                 metrics: ProjectorMetrics | None = None) -> None:
        self._settings, self._engine, self._stop, self._limits = settings, engine, stop, limits
        self._tables = tables
        self.metrics = metrics or ProjectorMetrics()
        self._next_lag = 0.0
        self._reader = EventReader(settings, [], client_id="tock-projector")
        self._committer = BatchCommitter(settings, engine, stop, tables=tables)
        self.applied = 0

    def run(self) -> None:
        """Project until ``stop`` is set."""
        try:
            start = self._seek()
            while not self._stop.is_set():
                start = self._step(start)
        except Stopped:
            pass
        finally:
            self._committer.close()
            self._reader.close()
            log.info("projector stopped after applying %d records", self.applied)

    def _step(self, start: Positions) -> Positions:
        records = gather(self._reader, self._limits)
        end = {**start, **self._reader.positions()}
        if not records and end == start:
            self._measure_lag(start)
            return start
        began = time.monotonic()
        try:
            applied = self._committer.commit(records, start, end)
        except OffsetsMoved as moved:
            log.warning("%s; seeking to the stored offsets", moved)
            return self._seek()
        self.applied += applied
        self.metrics.batch(len(records), applied, time.monotonic() - began)
        self._measure_lag(end)
        return end

    def _measure_lag(self, committed: Positions) -> None:
        now = time.monotonic()
        if now < self._next_lag:
            return
        self._next_lag = now + LAG_EVERY
        partitions = list(committed)
        # The reader's position, past a transaction's marker, once it delivered everything before it.
        read = self._reader.read_positions(partitions)
        positions = {part: max(offset, read.get(part, 0)) for part, offset in committed.items()}
        self.metrics.follow_lag(positions, self._reader.cached_ends(partitions))

    def _seek(self) -> Positions:
        stored = retry_outages(self._stored_offsets, self._stop)
        start = dict.fromkeys(projected_partitions(self._settings), 0)
        start.update({position: offset for position, offset in stored.items() if position in start})
        self._reader.assign([(logical_topic(topic), partition, offset)
                             for (topic, partition), offset in start.items()])
        log.info("projecting %d partitions from the offsets stored in the database", len(start))
        return start

    def _stored_offsets(self) -> Positions:
        with self._engine.connect() as connection:
            return stored_offsets(connection, self._tables)


def gather(reader: EventReader, limits: BatchLimits) -> list:
    """The next batch of records, as soon as there is one (see :class:`BatchLimits`)."""
    records = reader.poll(limits.idle_poll, 1)  # returns as soon as one record is there
    deadline = time.monotonic() + limits.linger
    while records and len(records) < limits.records:
        more = reader.poll(max(0.0, deadline - time.monotonic()), limits.records - len(records))
        if not more:
            break
        records.extend(more)
    return records


def run_projector(settings: Settings, stop: threading.Event, *, limits: BatchLimits | None = None,
                  metrics: ProjectorMetrics | None = None) -> int:
    """Open the database, check its tables, and project until ``stop``; returns records applied."""
    limits = limits or BatchLimits(records=settings.projector_batch)
    engine = open_engine(settings)
    try:
        try:  # a database away at start-up is waited for, as one away later is (not a reason to exit)
            problems = retry_outages(lambda: _prepared(engine), stop)
        except Stopped:
            return 0
        if problems:
            raise RuntimeError("the projection tables differ from this version's ("
                               + "; ".join(problems) + "); run `tock projections rebuild`")
        projector = Projector(settings, engine, stop, limits=limits, metrics=metrics)
        projector.run()
        return projector.applied
    finally:
        engine.dispose()


def _prepared(engine: Engine) -> list[str]:
    """Create the missing tables; how the existing ones differ from this version's. When they do not
    differ, create (or grow) the versioned views over them (projections/contract)."""
    create_tables(engine)
    problems = schema_problems(engine)
    if not problems:
        create_views(engine)
    return problems
