"""``tock projections rebuild [--verify]``: the tables again, from offset 0 of every topic.

A rebuild folds the log into fresh tables (``<table>__rebuild``) up to the end offsets
as they stood when it began, then swaps them in within one transaction; a projector
still running notices the stored offsets moved and seeks to them. ``verify`` folds the
log into scratch tables up to the live tables' own offsets and compares row for row.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Iterator

from confluent_kafka import TopicPartition
from sqlalchemy import Connection, Engine, select, text

from infra.log import EventReader
from infra.settings import Settings
from projections.committer import BatchCommitter
from projections.contract.views import drop_views, replace_views
from projections.db import drop_tables
from projections.projector import BatchLimits, gather, projected_partitions
from projections.records import logical_topic
from projections.tables import LIVE, OFFSETS, Tables
from projections.writer import Positions, stored_offsets

log = logging.getLogger("tock.rebuild")

REBUILD, VERIFY = "__rebuild", "__verify"
BATCH = 20_000


def end_offsets(settings: Settings, reader: EventReader) -> Positions:
    """Last stable offset of every projected partition (what a read_committed reader can reach)."""
    ends = {}
    for topic, partition in projected_partitions(settings):
        _low, high = reader.watermarks(topic, partition)
        ends[(topic, partition)] = high
    return ends


def catch_up(settings: Settings, engine: Engine, tables: Tables, targets: Positions | None = None) -> Positions:
    """Fold the log into ``tables`` from their stored offsets up to ``targets`` (default: the log's end)."""
    committer = BatchCommitter(settings, engine, threading.Event(), tables=tables)
    reader = EventReader(settings, [], client_id="tock-rebuild", partition_eof=True)
    try:
        targets = targets if targets is not None else end_offsets(settings, reader)
        with engine.connect() as connection:
            stored = stored_offsets(connection, tables)
        start = {position: stored.get(position, 0) for position in targets}
        pending = {position: end for position, end in targets.items() if end > start[position]}
        reader.assign([(logical_topic(topic), partition, start[(topic, partition)])
                       for topic, partition in pending])
        while pending:
            start = _next_batch(reader, committer, pending, start)
        return targets
    finally:
        committer.close()
        reader.close()


def _next_batch(reader: EventReader, committer: BatchCommitter, pending: Positions, start: Positions) -> Positions:
    records = [record for record in gather(reader, BatchLimits(records=BATCH, idle_poll=1.0))
               if record.offset < pending.get((record.topic, record.partition), -1)]
    positions = reader.positions()
    end = {**start, **{position: min(offset, pending[position]) for position, offset in positions.items()
                       if position in pending}}
    committer.commit(records, {p: o for p, o in start.items() if p in pending}, end)
    for position in [p for p, target in pending.items() if end[p] >= target or p in reader.at_end]:
        del pending[position]
        reader.consumer.pause([TopicPartition(*position)])
    return end


def rebuild(settings: Settings, engine: Engine) -> Positions:
    """Fold the whole log into fresh tables and swap them in for the live ones."""
    fresh = Tables(REBUILD)
    drop_tables(engine, fresh)
    fresh.metadata.create_all(engine)
    reached = catch_up(settings, engine, fresh)
    swap_in(engine, fresh)
    return reached


def swap_in(engine: Engine, fresh: Tables) -> None:
    """Replace the live tables by ``fresh`` in one transaction, then add the live indexes and the
    versioned views (dropped first: they name the tables being replaced)."""
    with engine.begin() as connection:
        drop_views(connection)
        with _renaming(connection):
            _rename_in(connection, fresh)
        for index in LIVE.indexes():
            index.create(connection, checkfirst=True)
        replace_views(connection)


def _rename_in(connection: Connection, fresh: Tables) -> None:
    quote = connection.dialect.identifier_preparer.quote
    for name in fresh.names:
        connection.execute(text(f"DROP TABLE IF EXISTS {quote(name)}"))
        connection.execute(text(f"ALTER TABLE {quote(name + fresh.suffix)} RENAME TO {quote(name)}"))
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"ALTER TABLE {quote(name)} RENAME CONSTRAINT "
                                    f"{quote('pk_' + name + fresh.suffix)} TO {quote('pk_' + name)}"))


@contextlib.contextmanager
def _renaming(connection: Connection) -> Iterator[None]:
    """SQLite checks every view when a table is renamed, and a view naming a table or a view being
    replaced (an integrator's own, on the versioned views) names a missing one meanwhile: the legacy
    rename, which checks none, lets the swap through; the views are whole again once it is done."""
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        connection.execute(text("PRAGMA legacy_alter_table=ON"))
    try:
        yield
    finally:
        if sqlite:
            connection.execute(text("PRAGMA legacy_alter_table=OFF"))


def verify(settings: Settings, engine: Engine, *, attempts: int = 5, limit: int = 20) -> list[str]:
    """Differences between the live tables and the log folded up to the live offsets (empty = equal).

    While a projector keeps writing, the comparison is repeated up to ``attempts`` times
    until the live offsets did not move during it.
    """
    scratch = Tables(VERIFY)
    drop_tables(engine, scratch)
    scratch.metadata.create_all(engine)
    try:
        differences: list[str] = []
        for _attempt in range(attempts):
            live = _live_offsets(engine)
            catch_up(settings, engine, scratch, live)
            differences = compare(engine, LIVE, scratch, limit=limit)
            if _live_offsets(engine) == live:
                return differences
            log.info("the live tables moved during the comparison; comparing again")
        return differences + ["the live tables kept moving: stop the projector to verify"]
    finally:
        drop_tables(engine, scratch)


def _live_offsets(engine: Engine) -> Positions:
    with engine.connect() as connection:
        return {position: offset for position, offset in stored_offsets(connection).items() if offset}


def compare(engine: Engine, expected: Tables, actual: Tables, *, limit: int = 20) -> list[str]:
    """Row-for-row differences between two sets of tables (offsets excepted), at most ``limit``."""
    differences: list[str] = []
    with engine.connect() as connection:
        for name in expected.names:
            if name == OFFSETS:
                continue
            differences += _compare_table(connection, expected[name], actual[name], limit - len(differences))
            if len(differences) >= limit:
                break
    return differences


def _compare_table(connection, live, rebuilt, limit: int) -> list[str]:
    order = [column.name for column in live.primary_key.columns]
    rows_live = connection.execute(select(live).order_by(*(live.c[c] for c in order))).fetchall()
    rows_rebuilt = connection.execute(select(rebuilt).order_by(*(rebuilt.c[c] for c in order))).fetchall()
    differences = []
    for row_live, row_rebuilt in itertools.zip_longest(rows_live, rows_rebuilt):
        if row_live is None or row_rebuilt is None or tuple(row_live) != tuple(row_rebuilt):
            differences.append(f"{live.name}: live {_describe(row_live)} != rebuilt {_describe(row_rebuilt)}")
            if len(differences) >= limit:
                break
    return differences


def _describe(row) -> str:
    return "(missing)" if row is None else str(tuple(row))
