"""The spool's files: written whole, owned by a live process or taken over once from a dead one."""

from __future__ import annotations

import subprocess

from infra.procfs import process_start_time
from services.runner.spool import Spool, owner_of


def dead_process() -> tuple[int, int]:
    process = subprocess.Popen(["true"])
    start = process_start_time(process.pid) or 0
    process.wait()
    return process.pid, start


def test_a_kept_value_is_one_whole_file_named_for_its_owner(tmp_path):
    spool = Spool(tmp_path, 123, 456)
    path = spool.keep(b"\x54value")
    assert [entry.name for entry in spool.folder.iterdir()] == [path.name]
    assert owner_of(path) == (123, 456)


def test_files_of_a_live_owner_are_left_alone(tmp_path):
    Spool.of_this_process(tmp_path).keep(b"mine")
    assert Spool(tmp_path, 1, 1).orphans() == []


def test_files_of_a_dead_owner_are_taken_over_once(tmp_path):
    pid, start = dead_process()
    Spool(tmp_path, pid, start).keep(b"\x54outcome")
    me = Spool.of_this_process(tmp_path)
    [orphan] = me.orphans()
    assert orphan.value == b"\x54outcome" and owner_of(orphan.path) == (me.pid, me.start_time)
    assert Spool(tmp_path, 1, 1).orphans() == []  # now ours, and we live
    me.forget(orphan.path)
    assert list(me.folder.iterdir()) == []


def test_a_reused_pid_is_not_its_old_owner(tmp_path):
    me = Spool.of_this_process(tmp_path)
    Spool(tmp_path, me.pid, me.start_time - 1).keep(b"\x54outcome")  # same pid, another process's start
    assert [orphan.value for orphan in Spool(tmp_path, 1, 1).orphans()] == [b"\x54outcome"]
