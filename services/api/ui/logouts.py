"""Web UI sessions ended by logout: a table the API keeps itself, beside the projections.

A session is a signed cookie (sessions.py); logging out must end it on the server too, or a copy of
the cookie would work until it expires. The API records the session's nonce here, and a session
whose nonce is recorded is over, on every API process sharing the database. It is not a projection:
a logout is not a command for the scheduler and nothing else reads it, so it is not in the log, and
``tock projections rebuild`` leaves it alone. Rows go once their session would have expired anyway.
"""

from __future__ import annotations

from sqlalchemy import Column, Engine, Float, MetaData, String, Table, delete, insert, select
from sqlalchemy.exc import IntegrityError

metadata = MetaData()
ENDED = Table("api_ended_session", metadata, Column("nonce", String, primary_key=True),
              Column("username", String), Column("expires", Float))


def create_table(engine: Engine) -> None:
    metadata.create_all(engine)


def end(engine: Engine, nonce: str, username: str, expires: float, now: float) -> None:
    """Record that the session with ``nonce`` was logged out; forget sessions expired by ``now``."""
    with engine.begin() as connection:
        connection.execute(delete(ENDED).where(ENDED.c.expires < now))
    try:
        with engine.begin() as connection:
            connection.execute(insert(ENDED).values(nonce=nonce, username=username, expires=expires))
    except IntegrityError:  # logged out twice (two tabs, a retry): it is over either way
        pass


def ended(engine: Engine, nonce: str) -> bool:
    with engine.connect() as connection:
        return connection.execute(select(ENDED.c.nonce).where(ENDED.c.nonce == nonce)).first() is not None
