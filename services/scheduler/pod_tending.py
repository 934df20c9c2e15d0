"""Tending the pods of executors that watch what they launched (Kubernetes).

Such an executor's watcher follows the owned partitions' pods; what it saw is written once per
pod (PodStarted, PodFinished: the core says which are worth writing), and a finished pod is
deleted once its end is written and its try's outcome is folded.

What was written is remembered per pod only while the observation can come again. A watcher
repeats a pod's PodStarted while it runs and its PodFinished until the pod is deleted (every
relist, every resumed watch); a PodStarted is worth writing only while its try is current and
active. So a pod's marks are done with once its PodFinished is written, or its try is no longer
current and active (or its partition no longer ours), and the watchers no longer hold it as a
finished pod; they are forgotten after FORGET_AFTER more seconds, which outlasts any stale
observation still on its way (a list sent before the delete, a watch resumed from an older
version, both bounded by the request timeouts and WATCH_SECONDS). Should a partition come back,
its pods are then treated as any new owner treats them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from infra.executors.base import TryKey, Watching
from infra.log import partition_for
from schemas import PodFinished, PodStarted
from services.scheduler.core.pods import try_has_ended, worth_writing
from services.scheduler.holdings import Holdings

PodEvent = PodStarted | PodFinished
FORGET_AFTER = 300.0  # seconds a pod's marks are kept once done with (see above)
FINISHED = PodFinished.__name__


@dataclass
class PodMarks:
    """What was written of one pod (by pod uid): its try, the kinds written, and since when its
    marks are done with (None: not yet)."""

    key: TryKey
    kinds: set[str] = field(default_factory=set)
    done_since: float | None = None


class PodTending:
    """Points the watchers at the owned partitions and writes what they saw, once per pod."""

    def __init__(self, watchers: Sequence[Watching], holdings: Holdings, partitions: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # The executors that watch (found once, when the Launcher was built: launching.py).
        self._watchers, self._holdings, self._partitions, self._clock = watchers, holdings, partitions, clock
        self._pods_written: set[tuple[str, str]] = set()  # (observation, pod uid) written already
        self._marks: dict[str, PodMarks] = {}  # pod uid -> what of it was written

    @property
    def pods_remembered(self) -> int:
        """Pods whose written observations are remembered now."""
        return len(self._marks)

    def watch_owned(self, wait: float = 0.0) -> None:
        """Executors that watch their tries (Kubernetes) follow the partitions owned now, and only them;
        each waits at most ``wait`` seconds for what they hold now (after a takeover the adoption
        probes read it; inside a rebalance callback nothing waits)."""
        for executor in self._watchers:
            executor.watch(sorted(self._holdings.memories), wait)

    def tend(self) -> list[tuple[int, PodEvent]]:
        """What the watchers saw of the owned partitions' pods (once per pod), to be written; delete
        the finished pods whose end is written and whose try's outcome is folded; forget the marks of
        pods done with (see above)."""
        written: list[tuple[int, PodEvent]] = []
        held: set[str] = set()
        for executor in self._watchers:
            written += self._worth_writing(executor.observations())
            finished = executor.finished_pods()
            held.update(pod.uid for pod in finished)
            executor.delete_finished([pod.name for pod in finished if self._try_ended(pod.key)
                                      and (FINISHED, pod.uid) in self._pods_written])
        self._forget_done(held, self._clock())
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
        self._remember(event for _partition, event in worth)
        return worth

    def _remember(self, written: Iterable[PodEvent]) -> None:
        for event in written:
            marks = self._marks.setdefault(event.pod_uid, PodMarks(
                (event.dag_id, event.run_id, event.task_id, event.try_number)))
            marks.kinds.add(type(event).__name__)
            marks.done_since = None  # just written: it may come again

    def _forget_done(self, held: set[str], now: float) -> None:
        """Forget the marks of pods done with for FORGET_AFTER seconds (``held``: the finished pods'
        uids the watchers still hold)."""
        for uid, marks in list(self._marks.items()):
            if uid in held or not self._done_with(marks):
                marks.done_since = None
            elif marks.done_since is None:
                marks.done_since = now
            elif now - marks.done_since >= FORGET_AFTER:
                del self._marks[uid]
                self._pods_written.difference_update((kind, uid) for kind in marks.kinds)

    def _done_with(self, marks: PodMarks) -> bool:
        """No observation of this pod can be worth writing again: its end is written, or its start
        would not be (its try is no longer current and active here)."""
        if FINISHED in marks.kinds:
            return True
        memory = self._holdings.memories.get(partition_for(marks.key[0], self._partitions))
        return memory is None or try_has_ended(memory.state, marks.key)  # not ours (any more), or over

    def _try_ended(self, key: TryKey) -> bool:
        memory = self._holdings.memories.get(partition_for(key[0], self._partitions))
        return memory is not None and try_has_ended(memory.state, key)
