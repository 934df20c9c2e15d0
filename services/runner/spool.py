"""The spool: a try's outcome on disk from just before it is appended until the broker acknowledges it.

A runner that dies in between (kill -9, OOM) leaves its files behind; the next runner on
this host resends the files whose owner is dead. ``<home>/spool/<id>.<pid>-<start>.spool``
names its owner (pid and process start time: pids are reused), so taking a file over is
one atomic rename and two runners starting together never both resend it. The body is
JSON: the writer's pid and start time, and the record value (``schemas.encode``) in base64.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.procfs import process_runs, process_start_time

log = logging.getLogger("tock.runner")

_SUFFIX = ".spool"


@dataclass(frozen=True, slots=True)
class Spooled:
    """A spooled record value and the file that keeps it."""

    path: Path
    value: bytes


class Spool:
    """The spool folder as seen by one process (the owner of the files it writes or takes over)."""

    def __init__(self, home: Path, pid: int, start_time: int) -> None:
        self.folder = home / "spool"
        self.pid, self.start_time = pid, start_time

    @classmethod
    def of_this_process(cls, home: Path) -> Spool:
        return cls(home, os.getpid(), process_start_time(os.getpid()) or 0)

    def keep(self, value: bytes) -> Path:
        """Write ``value`` to a new spool file (atomically: a reader sees all of it or nothing)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = uuid.uuid4().hex
        body = json.dumps({"pid": self.pid, "start_time": self.start_time,
                           "value": base64.b64encode(value).decode("ascii")})
        temporary = self.folder / f".{name}.tmp"
        temporary.write_text(body)
        # No fsync: the spool is against the runner's death, not the machine's.
        return temporary.rename(self.folder / f"{name}.{self.pid}-{self.start_time}{_SUFFIX}")

    def orphans(self) -> list[Spooled]:
        """The files whose owner is dead, each taken over by this process (renamed to it) and read."""
        if not self.folder.is_dir():
            return []
        orphans = []
        for path in sorted(self.folder.glob(f"*{_SUFFIX}")):
            owner = owner_of(path)
            if owner is None or not process_runs(*owner):
                taken = self._take_over(path)
                orphans += [] if taken is None else [taken]
        return orphans

    @staticmethod
    def forget(path: Path) -> None:
        """The broker acknowledged it: the file is no longer needed."""
        path.unlink(missing_ok=True)

    def _take_over(self, path: Path) -> Spooled | None:
        mine = path.with_name(f"{path.name.split('.', 1)[0]}.{self.pid}-{self.start_time}{_SUFFIX}")
        try:
            path.rename(mine)
        except FileNotFoundError:  # another runner took it first
            return None
        try:
            return Spooled(mine, base64.b64decode(json.loads(mine.read_text())["value"]))
        except (ValueError, KeyError, OSError) as error:
            log.error("spool file %s is unreadable (%s); left in place", mine, error)
            return None


def owner_of(path: Path) -> tuple[int, int] | None:
    """(pid, start time) named by a spool file, or None when the name is not a spool file's."""
    try:
        pid, start = path.name.removesuffix(_SUFFIX).split(".", 1)[1].split("-")
        return int(pid), int(start)
    except ValueError:
        return None


