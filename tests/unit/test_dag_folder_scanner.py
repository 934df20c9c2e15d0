"""The DAG folder scanner re-reads a file only when its stat changed, and not while the file is too recent for
its stat to tell two writes apart (two same-size writes within one tick of the file system's clock)."""

from __future__ import annotations

import time

import pytest

from services.dag_processor import scanning
from services.dag_processor.scanning import DagFolderScanner


@pytest.fixture
def reads(monkeypatch):
    counted: list[bytes] = []
    original = scanning.content_hash

    def counting(data: bytes) -> str:
        counted.append(data)
        return original(data)

    monkeypatch.setattr(scanning, "content_hash", counting)
    return counted


def test_a_settled_file_is_read_once_then_known_by_its_stat(tmp_path, reads):
    (tmp_path / "dag.py").write_text("x = 1\n")
    scanner = DagFolderScanner(tmp_path, clock=lambda: time.time() + 60)
    first = scanner.scan()
    assert [scanner.scan() for _ in range(3)] == [first] * 3
    assert len(reads) == 1


def test_a_file_changed_just_now_is_read_at_every_scan_until_it_settles(tmp_path, reads):
    (tmp_path / "dag.py").write_text("x = 1\n")
    later = [0.0]
    scanner = DagFolderScanner(tmp_path, clock=lambda: time.time() + later[0])
    for _ in range(3):
        scanner.scan()
    assert len(reads) == 3
    later[0] = 60.0
    for _ in range(3):
        scanner.scan()
    assert len(reads) == 4
