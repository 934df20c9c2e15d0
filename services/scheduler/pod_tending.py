"""Tending the pods of executors that watch what they launched (Kubernetes).

Such an executor's watcher follows the owned partitions' pods; what it saw is written once per
pod (PodStarted, PodFinished: the core says which are worth writing), and a finished pod is
deleted once its end is written and its try's outcome is folded.
"""

from __future__ import annotations

from collections.abc import Sequence

from infra.executors.base import Watching
from infra.log import partition_for
from schemas import PodFinished, PodStarted
from services.scheduler.core.pods import try_has_ended, worth_writing
from services.scheduler.holdings import Holdings

PodEvent = PodStarted | PodFinished


class PodTending:
    """Points the watchers at the owned partitions and writes what they saw, once per pod."""

    def __init__(self, watchers: Sequence[Watching], holdings: Holdings, partitions: int) -> None:
        # The executors that watch (found once, when the Launcher was built: launching.py).
        self._watchers, self._holdings, self._partitions = watchers, holdings, partitions
        self._pods_written: set[tuple[str, str]] = set()  # (observation, pod uid) written already

    def watch_owned(self, wait: float = 0.0) -> None:
        """Executors that watch their tries (Kubernetes) follow the partitions owned now, and only them;
        each waits at most ``wait`` seconds for what they hold now (after a takeover the adoption
        probes read it; inside a rebalance callback nothing waits)."""
        for executor in self._watchers:
            executor.watch(sorted(self._holdings.memories), wait)

    def tend(self) -> list[tuple[int, PodEvent]]:
        """What the watchers saw of the owned partitions' pods (once per pod), to be written; and
        delete the finished pods whose end is written and whose try's outcome is folded."""
        written: list[tuple[int, PodEvent]] = []
        for executor in self._watchers:
            written += self._worth_writing(executor.observations())
            executor.delete_finished([pod.name for pod in executor.finished_pods() if self._try_ended(pod.key)
                                      and ("PodFinished", pod.uid) in self._pods_written])
        return written

    def _worth_writing(self, observations: list[PodEvent]) -> list[tuple[int, PodEvent]]:
        by_partition: dict[int, list[PodEvent]] = {}
        for event in observations:
            by_partition.setdefault(partition_for(event.dag_id, self._partitions), []).append(event)
        worth: list[tuple[int, PodEvent]] = []
        for partition, observed in by_partition.items():
            memory = self._holdings.memories.get(partition)
            if memory is not None:
                worth += [(partition, event) for event in worth_writing(memory.state, observed, self._pods_written)]
        return worth

    def _try_ended(self, key: tuple[str, str, str, int]) -> bool:
        memory = self._holdings.memories.get(partition_for(key[0], self._partitions))
        return memory is not None and try_has_ended(memory.state, key)
