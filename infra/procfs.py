"""What /proc says of a process: its start time, and whether it still runs (Linux only).

A pid alone names no process for long (pids are reused), so Tock names one by its pid and
its start time (field 22 of ``/proc/<pid>/stat``, clock ticks since boot): a local try's
handle, a spool file's owner, a node agent's pod. One rule for every caller: a zombie has
ended. It has no start time and does not run, even before its parent reaps it.
"""

from __future__ import annotations

from pathlib import Path

ZOMBIE = "Z"


def process_start_time(pid: int) -> int | None:
    """The start time of the process ``pid`` in clock ticks since boot; None if there is none or it ended."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] == ZOMBIE:
        return None
    return int(fields[19])


def process_runs(pid: int, start_time: int) -> bool:
    """Whether the process that had ``pid`` and started at ``start_time`` still runs (not a reused pid)."""
    return process_start_time(pid) == start_time


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and ')'): state first."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()
