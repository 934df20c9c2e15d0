"""Taking partitions over in the background: settle, latest snapshot, replay of the tail.

A long replay on the poll thread would outlast max.poll.interval.ms and cost the member its
place in the group; it runs on a thread of its own while the main loop keeps polling and
deciding the partitions it owns. The main thread installs each result (``finished()``); a
partition revoked, or assigned again, while its replay ran has a newer epoch, and the stale
result is dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from infra.log import settle
from infra.settings import Settings
from schemas import EVENTS
from services.scheduler.memory import PartitionMemory, rebuild, restore

log = logging.getLogger("tock.scheduler")


@dataclass
class Takeover:
    """One background takeover of some partitions, and what it found."""

    partitions: list[int]
    epochs: dict[int, int]
    started: float
    memories: dict[int, PartitionMemory] = field(default_factory=dict)
    from_snapshot: set[int] = field(default_factory=set)
    settled: float = 0.0
    restored: float = 0.0
    replayed: float = 0.0
    error: Exception | None = None


@dataclass(frozen=True)
class TakeoverConfig:
    settings: Settings
    group_id: str
    client_id: str
    settle_timeout: float
    snapshots: bool = True  # False: tock.snapshots is missing, always replay the full history


def prepare(config: TakeoverConfig, takeover: Takeover) -> Takeover:
    """Wait out the previous owner's open transaction, restore the latest snapshots, replay the rest."""
    try:
        settle(config.settings, EVENTS, takeover.partitions, timeout=config.settle_timeout,
               client_id=f"{config.client_id}-settle", group_id=config.group_id)
        takeover.settled = time.time()
        restored = restore(config.settings, takeover.partitions, client_id=f"{config.client_id}-snapshots") \
            if config.snapshots else {}
        takeover.restored = time.time()
        takeover.memories = rebuild(config.settings, takeover.partitions, restored)
        takeover.from_snapshot = set(restored)
        takeover.replayed = time.time()
    except Exception as error:  # noqa: BLE001 - any failure of a takeover is retried, said loudly
        takeover.error = error
    return takeover


class BackgroundTakeovers:
    """Runs ``prepare`` on threads; epochs say which results are still wanted."""

    def __init__(self, config: TakeoverConfig, work: Callable[[TakeoverConfig, Takeover], Takeover] = prepare) -> None:
        self.config = config
        self._work = work
        self._epochs: dict[int, int] = {}
        self._running: dict[int, int] = {}  # partition -> epoch of its takeover under way
        self._done: queue.Queue[Takeover] = queue.Queue()

    def start(self, partitions: list[int]) -> None:
        for partition in partitions:
            self._epochs[partition] = self._running[partition] = self._epochs.get(partition, 0) + 1
        takeover = Takeover(partitions, {partition: self._epochs[partition] for partition in partitions}, time.time())
        threading.Thread(target=self._run, args=(takeover,), name=f"takeover-{partitions}", daemon=True).start()

    def cancel(self, partitions) -> None:
        """Revoked: results of takeovers under way for these partitions are dropped."""
        for partition in partitions:
            self._epochs[partition] = self._epochs.get(partition, 0) + 1
            self._running.pop(partition, None)

    @property
    def under_way(self) -> set[int]:
        return set(self._running)

    def finished(self) -> list[Takeover]:
        """Takeovers done since the last call, narrowed to the partitions still wanted."""
        done = []
        while True:
            try:
                takeover = self._done.get_nowait()
            except queue.Empty:
                return done
            current = [partition for partition in takeover.partitions
                       if self._running.get(partition) == takeover.epochs[partition]]
            for partition in current:
                del self._running[partition]
            if current:
                takeover.partitions = current
                takeover.memories = {partition: memory for partition, memory in takeover.memories.items()
                                     if partition in current}
                takeover.from_snapshot &= set(current)
                done.append(takeover)

    def _run(self, takeover: Takeover) -> None:
        self._done.put(self._work(self.config, takeover))
