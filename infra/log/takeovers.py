"""Taking partitions over in the background, for any member that replays a partition before acting on it.

A long takeover (wait out a previous owner's open transaction, restore a snapshot, replay the
tail) inside the rebalance callback would hold the member's poll thread: its loop stops, and past
max.poll.interval.ms it loses its place in the group. So the callback only parks the partitions
(infra/log/ownership.py) and starts the takeover here, on a thread of its own; the member's loop
goes on with what it owns and installs each finished takeover itself (``finished()``). A partition
revoked, or assigned again, while its takeover ran has a newer epoch, and the stale result is
dropped. Shared by the scheduler (services/scheduler/takeover.py) and the monitor
(services/monitor/takeovers.py); what a takeover does and holds is theirs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar


@dataclass
class TakeoverJob:
    """One background takeover of some partitions; subclasses add what it found (narrowed with it)."""

    partitions: list[int]
    epochs: dict[int, int] = field(default_factory=dict)
    started: float = 0.0
    error: Exception | None = None

    def narrow(self, partitions: list[int]) -> None:
        """Keep only the results of these partitions (those still wanted)."""
        self.partitions = partitions


Rebuilt = TypeVar("Rebuilt")


@dataclass
class RebuildJob(TakeoverJob, Generic[Rebuilt]):
    """A takeover that rebuilds each partition from its latest snapshot and the log after it: what it
    rebuilt per partition, which partitions came from a snapshot, and when each stage ended."""

    rebuilt: dict[int, Rebuilt] = field(default_factory=dict)
    from_snapshot: set[int] = field(default_factory=set)
    settled: float = 0.0   # the previous owner's transactions were over
    restored: float = 0.0  # the snapshots were read
    replayed: float = 0.0  # the log after them was folded

    def narrow(self, partitions: list[int]) -> None:
        self.partitions = partitions
        self.rebuilt = {partition: held for partition, held in self.rebuilt.items() if partition in partitions}
        self.from_snapshot &= set(partitions)


Job = TypeVar("Job", bound=TakeoverJob)


class BackgroundTakeovers(Generic[Job]):
    """Runs ``work`` on a thread per takeover; epochs say which results are still wanted."""

    def __init__(self, work: Callable[[Job], Job]) -> None:
        self._perform = work
        self._epochs: dict[int, int] = {}
        self._running: dict[int, int] = {}  # partition -> epoch of its takeover under way
        self._done: queue.Queue[Job] = queue.Queue()

    def begin(self, job: Job) -> None:
        """Take ``job.partitions`` over on a thread of its own (a newer epoch for each of them)."""
        for partition in job.partitions:
            self._epochs[partition] = self._running[partition] = self._epochs.get(partition, 0) + 1
        job.epochs = {partition: self._epochs[partition] for partition in job.partitions}
        threading.Thread(target=self._run, args=(job,), name=f"takeover-{job.partitions}", daemon=True).start()

    def cancel(self, partitions: Iterable[int]) -> None:
        """Revoked: results of takeovers under way for these partitions are dropped."""
        for partition in partitions:
            self._epochs[partition] = self._epochs.get(partition, 0) + 1
            self._running.pop(partition, None)

    @property
    def under_way(self) -> set[int]:
        return set(self._running)

    def finished(self) -> list[Job]:
        """Takeovers done since the last call, narrowed to the partitions still wanted."""
        done: list[Job] = []
        while True:
            try:
                job = self._done.get_nowait()
            except queue.Empty:
                return done
            current = self._current(job)
            for partition in current:
                del self._running[partition]
            if current:
                job.narrow(current)
                done.append(job)

    def _current(self, job: Job) -> list[int]:
        return [partition for partition in job.partitions if self._running.get(partition) == job.epochs[partition]]

    def _run(self, job: Job) -> None:
        self._done.put(self._perform(job))

