"""The scheduler's takeovers in the background: settle, latest snapshot, replay of the tail.

They run on threads of their own (infra/log/takeovers.py, shared with the monitor) while the main
loop keeps polling and deciding the partitions it owns; it installs each result itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from infra.heap import release_freed_memory
from infra.log import settle
from infra.log.takeovers import BackgroundTakeovers as SharedTakeovers
from infra.log.takeovers import RebuildJob
from infra.settings import Settings
from schemas import EVENTS
from services.scheduler.memory import PartitionMemory, rebuild, restore

log = logging.getLogger("tock.scheduler")


class Takeover(RebuildJob[PartitionMemory]):
    """One background takeover of some partitions: the memories it rebuilt (``rebuilt``)."""


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
        takeover.rebuilt = rebuild(config.settings, takeover.partitions, restored)
        takeover.from_snapshot = set(restored)
        takeover.replayed = time.time()
        release_freed_memory()  # the replay's decoded records are garbage now: their pages go back
    except Exception as error:  # noqa: BLE001 - any failure of a takeover is retried, said loudly
        takeover.error = error
    return takeover


class BackgroundTakeovers(SharedTakeovers[Takeover]):
    """Runs ``prepare`` (or ``work``) on threads; epochs say which results are still wanted."""

    def __init__(self, config: TakeoverConfig, work: Callable[[TakeoverConfig, Takeover], Takeover] = prepare) -> None:
        super().__init__(lambda takeover: self._work(self.config, takeover))
        self.config = config
        self._work = work

    def start(self, partitions: list[int]) -> None:
        self.begin(Takeover(partitions, started=time.time()))
