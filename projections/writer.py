"""The only module that writes projection tables: one DB transaction per batch.

A batch's rows and the offsets it consumed commit together. Before folding, the stored
offsets are read (and locked on PostgreSQL): records below them were applied already and
are skipped; a batch that starts past them (a rebuild swapped the tables, or another
projector wrote) is refused with :class:`OffsetsMoved` so the caller re-reads its start.

A batch folds in memory and writes only the final row of each key it touched, a few
set-based statements per table through the driver (not one statement per row): on
PostgreSQL keys travel as arrays (``unnest``) and history goes in by COPY; on SQLite
(in-process) ``executemany`` is cheap already.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import closing

from sqlalchemy import Connection, Engine, Float, Table, select

from projections.records import Key, Record, Row
from projections.tables import LIVE, OFFSETS, TASK_EVENT, Tables
from projections.view import View, apply, touched_keys

Positions = dict[tuple[str, int], int]
DeadLetter = Callable[[Record, str], None]
_SQLITE_KEYS_PER_SELECT = 300  # keeps a statement under SQLite's 999 bound parameters


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
    with engine.begin() as connection, closing(connection.connection.driver_connection.cursor()) as cursor:
        stored = stored_offsets(connection, tables, lock=True)
        _refuse_gaps(stored, start)
        sql = _Driver(cursor, connection.dialect)
        loaded = {name: sql.load(tables[name], keys) for name, keys in touched_keys(records).items()}
        view = View(rows={table: dict(rows) for table, rows in loaded.items()}, offsets=dict(stored))
        applied = _fold(view, records, dead_letter)
        _write_rows(sql, tables, loaded, view)
        _write_offsets(sql, tables, stored, view.offsets, end)
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


def _write_rows(sql: _Driver, tables: Tables, loaded: dict[str, dict[Key, Row]], view: View) -> None:
    for name, rows in view.rows.items():
        before = loaded.get(name, {})
        changed = [row for key, row in rows.items() if row is not None and row != before.get(key)]
        deleted = [key for key, row in rows.items() if row is None and key in before]
        sql.upsert(tables[name], changed)
        sql.delete(tables[name], deleted)
    sql.append(tables[TASK_EVENT], view.history)


def _write_offsets(sql: _Driver, tables: Tables, stored: Positions, folded: Positions, end: Positions) -> None:
    positions = set(folded) | set(end)
    rows = [{"topic": topic, "partition": partition,
             "next_offset": max(stored.get((topic, partition), 0), folded.get((topic, partition), 0),
                                end.get((topic, partition), 0))}
            for topic, partition in positions]
    sql.upsert(tables[OFFSETS], [row for row in rows
                                 if row["next_offset"] != stored.get((row["topic"], row["partition"]))])


class _Driver:
    """Set-based reads and writes of whole rows, on the DB-API connection of the batch's transaction."""

    def __init__(self, cursor, dialect) -> None:
        self._cursor, self._dialect = cursor, dialect
        self._postgres = dialect.name == "postgresql"

    def load(self, table: Table, keys: set[Key]) -> dict[Key, Row]:
        """The stored rows of these keys, by key."""
        if not keys:
            return {}
        statements = _statements(self._dialect, table)
        fetched = self._fetch_postgres(statements, keys) if self._postgres else self._fetch_sqlite(statements, keys)
        width = len(statements.primary)
        return {tuple(values[:width]): dict(zip(statements.columns, values, strict=False)) for values in fetched}

    def _fetch_postgres(self, statements: _Statements, keys: set[Key]) -> list[tuple]:
        self._cursor.execute(statements.load, [list(column) for column in zip(*keys, strict=False)])
        return self._cursor.fetchall()

    def _fetch_sqlite(self, statements: _Statements, keys: set[Key]) -> list[tuple]:
        fetched, ordered = [], list(keys)
        for index in range(0, len(ordered), _SQLITE_KEYS_PER_SELECT):
            chunk = ordered[index:index + _SQLITE_KEYS_PER_SELECT]
            self._cursor.execute(statements.sqlite_load(len(chunk)), [value for key in chunk for value in key])
            fetched += self._cursor.fetchall()
        return fetched

    def upsert(self, table: Table, rows: list[Row]) -> None:
        """Insert these rows, replacing the stored ones with the same key."""
        if rows:
            statements = _statements(self._dialect, table)
            self._write(statements, statements.upsert, rows)

    def delete(self, table: Table, keys: list[Key]) -> None:
        if keys:
            statements = _statements(self._dialect, table)
            if self._postgres:
                self._cursor.execute(statements.delete, [list(column) for column in zip(*keys, strict=False)])
            else:
                self._cursor.executemany(statements.delete, keys)

    def append(self, table: Table, rows: list[Row]) -> None:
        """Insert rows that are new by construction (history)."""
        if not rows:
            return
        statements = _statements(self._dialect, table)
        if not self._postgres:
            self._write(statements, statements.insert, rows)
            return
        # COPY is several times faster than INSERTs for the one row every event adds.
        with self._cursor.copy(statements.copy) as copy:
            for row in rows:
                copy.write_row([row[name] for name in statements.columns])

    def _write(self, statements: _Statements, statement: str, rows: list[Row]) -> None:
        names, floats = statements.columns, statements.floats
        if self._postgres:  # one statement: an array per column, unnested into rows
            self._cursor.execute(statement, [_as_floats([row[name] for row in rows]) if name in floats
                                             else [row[name] for row in rows] for name in names])
        else:
            self._cursor.executemany(statement, [[row[name] for name in names] for row in rows])


class _Statements:
    """The SQL text of one table's reads and writes on one dialect (primary key columns first)."""

    def __init__(self, dialect, table: Table) -> None:
        quote = dialect.identifier_preparer.quote
        self.primary = tuple(column.name for column in table.primary_key.columns)
        self.columns = self.primary + tuple(c.name for c in table.columns if c.name not in self.primary)
        self._name = quote(table.name)
        self._quoted = {name: quote(name) for name in self.columns}
        self._arrays = {name: f"%b::{table.c[name].type.compile(dialect=dialect)}[]" for name in self.columns}
        self._postgres = dialect.name == "postgresql"
        self.floats = frozenset(c.name for c in table.columns if isinstance(c.type, Float))
        listed = ", ".join(self._quoted[name] for name in self.columns)
        self._select = f"SELECT {', '.join('t.' + self._quoted[name] for name in self.columns)} FROM {self._name} AS t"
        self.load = f"{self._select} JOIN {self._unnest(self.primary, 'k')} ON {self._key_match('k')}"
        self.upsert = f"{self._insert(listed)} {self._on_conflict()}"
        self.insert = self._insert(listed)
        self.copy = f"COPY {self._name} ({listed}) FROM STDIN"
        self.delete = (f"DELETE FROM {self._name} AS t USING {self._unnest(self.primary, 'k')} WHERE "
                       f"{self._key_match('k')}" if self._postgres else
                       f"DELETE FROM {self._name} WHERE {' AND '.join(self._quoted[n] + ' = ?' for n in self.primary)}")

    def sqlite_load(self, keys: int) -> str:
        if len(self.primary) == 1:
            return f"{self._select} WHERE t.{self._quoted[self.primary[0]]} IN ({_marks(keys)})"
        columns = ", ".join(f"t.{self._quoted[name]}" for name in self.primary)
        one = f"({_marks(len(self.primary))})"
        return f"{self._select} WHERE ({columns}) IN (VALUES {', '.join([one] * keys)})"

    def _unnest(self, names: tuple[str, ...], alias: str) -> str:
        arrays = ", ".join(self._arrays[name] for name in names)
        return f"unnest({arrays}) AS {alias}({', '.join(self._quoted[name] for name in names)})"

    def _key_match(self, alias: str) -> str:
        return " AND ".join(f"t.{self._quoted[n]} = {alias}.{self._quoted[n]}" for n in self.primary)

    def _insert(self, listed: str) -> str:
        if self._postgres:
            return f"INSERT INTO {self._name} ({listed}) SELECT * FROM {self._unnest(self.columns, 'r')}"
        return f"INSERT INTO {self._name} ({listed}) VALUES ({_marks(len(self.columns))})"

    def _on_conflict(self) -> str:
        updates = [f"{self._quoted[n]} = excluded.{self._quoted[n]}" for n in self.columns if n not in self.primary]
        target = ", ".join(self._quoted[name] for name in self.primary)
        return f"ON CONFLICT ({target}) " + (f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING")


@functools.lru_cache(maxsize=64)
def _statements(dialect, table: Table) -> _Statements:
    return _Statements(dialect, table)


def _marks(count: int) -> str:
    return ", ".join(["?"] * count)


def _as_floats(values: list) -> list:
    # An array must hold one Python type; an int where a float column expects a float is one.
    return [value if value is None or type(value) is float else float(value) for value in values]
