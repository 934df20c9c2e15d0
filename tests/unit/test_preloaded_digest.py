"""A file launcher's check that its file is unchanged (FileLauncher.current): the bytes are read again only
when a file's stat changed, or while it changed too recently for the stat to tell."""

from __future__ import annotations

import os
import time

import pytest

from services.runner import preloaded
from services.runner.file_launchers import FileLauncher
from services.runner.preloaded import Preloaded, digest


@pytest.fixture
def reads(monkeypatch):
    """How many times the launcher hashed the files' bytes."""
    counted = []

    def counting(files, first=None):
        counted.append(1)
        return digest(files, first)

    monkeypatch.setattr(preloaded, "digest", counting)
    return counted


def launcher_of(*paths) -> FileLauncher:
    files = tuple(str(path) for path in paths)
    return FileLauncher(files[0], pid=0, requests=-1, answers=-1, started=0.0, used=0.0,
                        preloaded=Preloaded(files, digest(files)))


def later() -> float:
    return time.time() + 60  # the files were written more than SETTLED_SECONDS before


def test_settled_files_are_read_once_then_known_by_their_stat(tmp_path, reads):
    dag, helper = tmp_path / "dag.py", tmp_path / "helper.py"
    dag.write_text("x = 1\n")
    helper.write_text("y = 2\n")
    launcher = launcher_of(dag, helper)
    assert [launcher.current(now=later()) for _ in range(5)] == [True] * 5
    assert len(reads) == 1


def test_files_changed_just_now_are_read_at_every_check(tmp_path, reads):
    dag = tmp_path / "dag.py"
    dag.write_text("x = 1\n")
    launcher = launcher_of(dag)
    assert [launcher.current(now=time.time()) for _ in range(3)] == [True] * 3
    assert len(reads) == 3


@pytest.mark.parametrize("which", [0, 1])
def test_an_edit_keeping_the_size_and_the_mtime_is_seen_after_the_files_were_known(tmp_path, reads, which):
    files = [tmp_path / "dag.py", tmp_path / "helper.py"]
    for file in files:
        file.write_text("x = 1\n")
    launcher = launcher_of(*files)
    assert launcher.current(now=later())
    stat = os.stat(files[which])
    files[which].write_text("x = 2\n")
    os.utime(files[which], ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the ctime still moves
    assert not launcher.current(now=later())
    assert len(reads) == 2


def test_a_helper_module_removed_is_seen(tmp_path, reads):
    dag, helper = tmp_path / "dag.py", tmp_path / "helper.py"
    dag.write_text("x = 1\n")
    helper.write_text("y = 2\n")
    launcher = launcher_of(dag, helper)
    assert launcher.current(now=later())
    helper.unlink()
    assert not launcher.current(now=later())
