"""The versioned views (``tock_v1_dag_run``, ...) over the live tables, on SQLite and PostgreSQL.

The projector creates them at start-up once the live tables have this version's columns, and a
rebuild drops them before swapping the tables in and creates them again in the same transaction (a
PostgreSQL view is bound to the table it was made on). A view whose columns begin with the declared
ones is left as it is, so a restart writes nothing; one an older Tock made, lacking columns, grows
(PostgreSQL: ``CREATE OR REPLACE VIEW``, which keeps the objects of integrators that depend on it).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, Engine, Select, inspect, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError

from projections.contract.surface import VERSIONS, VIEW_PREFIX, PublicTable, column_of, view_name

ATTEMPTS = 5
_OURS = re.compile(rf"^{VIEW_PREFIX}\d+_")


def view_query(public: PublicTable) -> Select[Any]:
    """``SELECT`` the offered columns of the live table, in the declared order."""
    return select(*(column_of(public.table, name) for name in public.columns))


def declared_views() -> list[tuple[str, Select[Any]]]:
    """(view name, its query) of every declared version."""
    return [(view_name(version, public.table), view_query(public))
            for version, tables in VERSIONS.items() for public in tables]


def create_views(engine: Engine) -> None:
    """Create or replace the declared views in their own transaction. Another process doing the same
    at the same moment (two projectors starting) is not an error: each attempt looks again."""
    for attempt in range(ATTEMPTS):
        try:
            with engine.begin() as connection:
                replace_views(connection)
            return
        except (OperationalError, ProgrammingError, IntegrityError) as error:
            if "already exists" not in str(error) or attempt == ATTEMPTS - 1:
                raise


def replace_views(connection: Connection) -> None:
    """Create each declared view that is missing or lacks declared columns. One whose columns begin with
    the declared ones is left as it is: this version's, or a newer Tock's that grew it."""
    _lock(connection)
    inspector = inspect(connection)
    existing = set(inspector.get_view_names())
    for name, query in declared_views():
        declared = list(query.selected_columns.keys())
        if name in existing and [column["name"] for column in inspector.get_columns(name)][:len(declared)] == declared:
            continue
        for statement in _replacing(connection, name, query, exists=name in existing):
            connection.execute(text(statement))


def drop_views(connection: Connection) -> None:
    """Drop every view of any version (``tock_v<N>_...``), those of a newer Tock too."""
    _lock(connection)
    quote = connection.dialect.identifier_preparer.quote
    for name in inspect(connection).get_view_names():
        if not _OURS.match(name):
            continue
        try:
            connection.execute(text(f"DROP VIEW IF EXISTS {quote(name)}"))
        except DBAPIError as error:  # PostgreSQL: an object of an integrator's depends on it
            raise ViewInUse(f"cannot drop the view {name} to replace the tables under it ({error.orig}); drop "
                            "your objects that depend on it, and create them again after") from error


class ViewInUse(RuntimeError):
    """A versioned view cannot be dropped: objects outside Tock depend on it."""


def _replacing(connection: Connection, name: str, query: Select[Any], *, exists: bool) -> list[str]:
    quoted = connection.dialect.identifier_preparer.quote(name)
    definition = str(query.compile(dialect=connection.dialect))
    if connection.dialect.name == "postgresql":
        return [f"CREATE OR REPLACE VIEW {quoted} AS {definition}"]
    return [*([f"DROP VIEW IF EXISTS {quoted}"] if exists else []), f"CREATE VIEW {quoted} AS {definition}"]


def _lock(connection: Connection) -> None:
    # PostgreSQL: one process at a time changes this schema's views, so two starting projectors
    # neither race on the catalog nor see each other's half-made views (released at commit).
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('tock views ' || current_schema()))"))
