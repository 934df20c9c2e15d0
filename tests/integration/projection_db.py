"""Fixtures for projection tests: the same test on SQLite and on PostgreSQL (own schema each)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import quote

import psycopg
import pytest
from sqlalchemy import Engine

from infra.settings import Settings
from projections.db import create_tables, open_engine
from projections.queries import projected_offsets
from tests.scenarios.scheduler_support import create_topics, environment


def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """A fresh schema in the session's PostgreSQL; yields a URL whose search_path is that schema."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    yield f"{postgres_url}?options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'projections.db'}"
    else:
        yield from postgres_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def projection_settings(make_settings: Callable[..., Settings], db_url: str) -> Settings:
    """Settings with this test's topics created and its own database."""
    settings = make_settings(db_url=db_url)
    create_topics(settings)
    return settings


@pytest.fixture
def engine(projection_settings: Settings) -> Iterator[Engine]:
    engine = open_engine(projection_settings)
    create_tables(engine)
    yield engine
    engine.dispose()


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def offsets_reached(engine: Engine, expected: dict[tuple[str, int], int]) -> bool:
    """Whether the tables reflect the log at least up to ``expected`` offsets."""
    try:
        stored = {(row["topic"], row["partition"]): row["next_offset"] for row in projected_offsets(engine)}
    except Exception:  # noqa: BLE001 - tables may not exist yet, or the DB may be restarting
        return False
    return all(stored.get(position, 0) >= offset for position, offset in expected.items())


def produce(settings: Settings, events: list, *, garbage_after: int | None = None) -> None:
    """Append events with the log client (and, optionally, garbage bytes after the n-th one)."""
    from infra.log import partition_for
    from schemas import EVENTS
    from tests.shared_log import shared_event_log

    log = shared_event_log(settings)
    for index, event in enumerate(events):
        log.append(event)
        if index == garbage_after:
            partition = partition_for(event.dag_id, settings.partitions)
            log.append_raw(EVENTS, b"\x00garbage, not an event", event.dag_id, partition)
    log.flush()


def log_end(settings: Settings) -> dict[tuple[str, int], int]:
    """End offsets of every projected partition now."""
    from infra.log import EventReader
    from projections.rebuild import end_offsets

    with EventReader(settings, []) as reader:
        return {position: end for position, end in end_offsets(settings, reader).items() if end}


class ProjectorThread:
    """``run_projector`` in a thread of the test, stopped like SIGTERM stops the command."""

    def __init__(self, settings: Settings, **limits) -> None:
        import threading

        from projections.projector import BatchLimits, run_projector

        self.stop = threading.Event()
        self.applied: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.applied.append(run_projector(settings, self.stop, limits=BatchLimits(**limits))),
            daemon=True)

    def __enter__(self) -> ProjectorThread:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the projector did not stop within 30 s"


def projector_process(settings: Settings, log_path):
    """``tock projector`` as a child process with these settings (stdout/stderr to ``log_path``)."""
    import subprocess
    import sys

    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "tock_cli", "projector"], env=environment(settings),
                                stdout=log, stderr=subprocess.STDOUT)


def many_runs(count: int, tasks: int = 5) -> list:
    """Lifecycle events of ``count`` runs of ``tasks`` tasks each, over several DAGs."""
    from tests.unit.projection_logs import lifecycle

    events = []
    for index in range(count):
        for task in range(tasks):
            events += lifecycle(f"dag{index % 7}", f"run{index}", f"task{task}", 1, 1_700_000_000.0 + index)
    return events
