"""The only module that writes projection tables: one DB transaction per batch.

A batch's rows and the offsets it consumed commit together. Before folding, the stored
offsets are read (and locked on PostgreSQL): records below them were applied already and
are skipped; a batch that starts past them (a rebuild swapped the tables, or another
projector wrote) is refused with :class:`OffsetsMoved` so the caller re-reads its start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import Connection, Engine, Table, bindparam, delete, select, tuple_
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from projections.records import Key, Record, Row
from projections.tables import LIVE, OFFSETS, TASK_EVENT, Tables
from projections.view import View, apply, touched_keys

Positions = dict[tuple[str, int], int]
DeadLetter = Callable[[Record, str], None]
_CHUNK = 400


class OffsetsMoved(RuntimeError):
    """The stored offsets are behind where this batch starts: re-read them and seek there."""


def stored_offsets(connection: Connection, tables: Tables = LIVE, *, lock: bool = False) -> Positions:
    """Next offset per (topic, partition) the tables reflect."""
    query = select(tables[OFFSETS])
    if lock and connection.dialect.name == "postgresql":
        query = query.with_for_update()
    return {(row.topic, row.partition): row.next_offset for row in connection.execute(query)}


def commit_batch(engine: Engine, records: list[Record], start: Positions, end: Positions,
                 dead_letter: DeadLetter, tables: Tables = LIVE) -> int:
    """Fold ``records`` (read from ``start`` up to ``end``) and commit rows and offsets atomically.

    A record the fold cannot apply is handed to ``dead_letter`` with the reason and skipped.
    Returns how many records were applied.
    """
    with engine.begin() as connection:
        stored = stored_offsets(connection, tables, lock=True)
        _refuse_gaps(stored, start)
        loaded = _load(connection, tables, touched_keys(records))
        view = View(rows={table: dict(rows) for table, rows in loaded.items()}, offsets=dict(stored))
        applied = _fold(view, records, dead_letter)
        _write_rows(connection, tables, loaded, view)
        _write_offsets(connection, tables, stored, view.offsets, end)
    return applied


def _refuse_gaps(stored: Positions, start: Positions) -> None:
    gaps = {position: offset for position, offset in start.items() if offset > stored.get(position, 0)}
    if gaps:
        raise OffsetsMoved(f"batch starts past the stored offsets at {sorted(gaps.items())[:3]}")


def _fold(view: View, records: Iterable[Record], dead_letter: DeadLetter) -> int:
    applied = 0
    for record in records:
        try:
            apply(view, record)
            applied += 1
        except Exception as error:  # noqa: BLE001 - any failure of the fold is the record's, not ours
            dead_letter(record, f"cannot apply {type(record.event).__name__}: {error!r}")
            view.offsets[(record.topic, record.partition)] = record.offset + 1
    return applied


def _load(connection: Connection, tables: Tables, keys: dict[str, set[Key]]) -> dict[str, dict[Key, Row]]:
    loaded: dict[str, dict[Key, Row]] = {}
    for name, wanted in keys.items():
        table = tables[name]
        primary = list(table.primary_key.columns)
        loaded[name] = {}
        ordered = sorted(wanted)
        for index in range(0, len(ordered), _CHUNK):
            chunk = ordered[index:index + _CHUNK]
            condition = (primary[0].in_([key[0] for key in chunk]) if len(primary) == 1
                         else tuple_(*primary).in_(chunk))
            for row in connection.execute(select(table).where(condition)).mappings():
                loaded[name][tuple(row[column.name] for column in primary)] = dict(row)
    return loaded


def _write_rows(connection: Connection, tables: Tables, loaded: dict[str, dict[Key, Row]], view: View) -> None:
    for name, rows in view.rows.items():
        before = loaded.get(name, {})
        changed = [row for key, row in rows.items() if row is not None and row != before.get(key)]
        deleted = [key for key, row in rows.items() if row is None and key in before]
        if changed:
            connection.execute(_upsert(connection, tables[name]), changed)
        if deleted:
            _delete(connection, tables[name], deleted)
    if view.history:
        _append_history(connection, tables[TASK_EVENT], view.history)


def _write_offsets(connection: Connection, tables: Tables, stored: Positions, folded: Positions,
                   end: Positions) -> None:
    positions = set(folded) | set(end)
    rows = [{"topic": topic, "partition": partition,
             "next_offset": max(stored.get((topic, partition), 0), folded.get((topic, partition), 0),
                                end.get((topic, partition), 0))}
            for topic, partition in positions]
    changed = [row for row in rows if row["next_offset"] != stored.get((row["topic"], row["partition"]))]
    if changed:
        connection.execute(_upsert(connection, tables[OFFSETS]), changed)


def _append_history(connection: Connection, table: Table, rows: list[Row]) -> None:
    if connection.dialect.name != "postgresql":
        connection.execute(table.insert(), rows)
        return
    # COPY is several times faster than INSERTs for the one row every event adds.
    names = [column.name for column in table.columns]
    cursor = connection.connection.driver_connection.cursor()
    quoted = ", ".join(f'"{name}"' for name in names)
    with cursor.copy(f'COPY "{table.name}" ({quoted}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row([row[name] for name in names])


def _upsert(connection: Connection, table: Table):
    insert = postgresql_insert if connection.dialect.name == "postgresql" else sqlite_insert
    statement = insert(table)
    primary = [column.name for column in table.primary_key.columns]
    updates = {column.name: statement.excluded[column.name] for column in table.columns
               if column.name not in primary}
    return statement.on_conflict_do_update(index_elements=primary, set_=updates)


def _delete(connection: Connection, table: Table, keys: list[Key]) -> None:
    primary = list(table.primary_key.columns)
    condition = [column == bindparam(f"key_{column.name}") for column in primary]
    statement = delete(table).where(*condition)
    connection.execute(statement, [{f"key_{column.name}": value for column, value in zip(primary, key)}
                                   for key in keys])
