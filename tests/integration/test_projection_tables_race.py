"""Several processes creating the projection tables at once (a projector starting while CLI
commands read the same SQLite file) all succeed: none dies on "table already exists"."""

from __future__ import annotations

import multiprocessing

from infra.settings import Settings
from projections.db import create_tables, open_engine


def create(home: str) -> None:
    create_tables(open_engine(Settings(home=home)))


def test_tables_created_by_several_processes_at_once(tmp_path):
    context = multiprocessing.get_context("fork")
    for round_number in range(10):
        home = str(tmp_path / f"home{round_number}")
        processes = [context.Process(target=create, args=(home,)) for _ in range(4)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [process.exitcode for process in processes] == [0, 0, 0, 0]
