"""The scenarios' shared fixture: the parts a test starts (its Processes, workers, node agents, LogTail),
each closed at the end of the test whatever happened (agents after processes: pods outlive schedulers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def system() -> Iterator[dict]:
    parts: dict = {}
    yield parts
    for name in ("processes", "workers", "agents", "tail"):
        if name in parts:
            parts[name].close()
