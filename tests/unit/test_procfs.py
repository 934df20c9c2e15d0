"""/proc facts of a process with one rule: a zombie has ended (no start time, not running)."""

from __future__ import annotations

import os
import subprocess
import time

from infra.executors import is_alive
from infra.procfs import process_runs, process_start_time


def zombie() -> subprocess.Popen:
    """A child that exited and is not reaped yet."""
    process = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while open(f"/proc/{process.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    return process


def test_a_running_process_has_a_start_time_and_runs():
    start = process_start_time(os.getpid())
    assert start is not None and process_runs(os.getpid(), start)


def test_a_missing_process_has_no_start_time():
    assert process_start_time(2**22 + 17) is None and not process_runs(2**22 + 17, 0)


def test_a_reused_pid_is_another_process():
    assert not process_runs(os.getpid(), (process_start_time(os.getpid()) or 0) - 1)


def test_a_zombie_has_ended_for_every_caller():
    process = zombie()
    try:
        assert process_start_time(process.pid) is None
        assert not process_runs(process.pid, 0)
        assert is_alive(f"{process.pid}@host-a:0", "host-a") is False
    finally:
        process.wait()
