"""Opening the projections database: SQLite (WAL) under TOCK_HOME by default, or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from infra.settings import Settings
from projections.tables import LIVE, Tables


def open_engine(settings: Settings) -> Engine:
    """An engine on ``settings.resolved_db_url``; SQLite files get WAL and a busy timeout."""
    url = make_url(settings.resolved_db_url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


CREATE_ATTEMPTS = 5


def create_tables(engine: Engine, tables: Tables = LIVE) -> None:
    """Create missing tables (live ones with their secondary indexes). Another process creating
    them at the same moment (a projector starting while a CLI command reads) is not an error:
    each attempt creates what is still missing."""
    for attempt in range(CREATE_ATTEMPTS):
        try:
            tables.metadata.create_all(engine)
            return
        except (OperationalError, ProgrammingError, IntegrityError) as error:
            if "already exists" not in str(error) or attempt == CREATE_ATTEMPTS - 1:
                raise


def drop_tables(engine: Engine, tables: Tables) -> None:
    tables.metadata.drop_all(engine)


def schema_problems(engine: Engine, tables: Tables = LIVE) -> list[str]:
    """How the existing tables' columns differ from the declared ones (a rebuild fixes it)."""
    inspector = inspect(engine)
    problems = []
    for table in tables.by_name.values():
        actual = {column["name"] for column in inspector.get_columns(table.name)}
        declared = {column.name for column in table.columns}
        if actual != declared:
            missing, unexpected = sorted(declared - actual), sorted(actual - declared)
            problems.append(f"{table.name}: missing {missing}, unexpected {unexpected}")
    return problems
