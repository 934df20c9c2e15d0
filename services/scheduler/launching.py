"""Side effects after a commit: launching queued tries on their executors, bounded by each
executor's parallelism, and revoking killed tries on executors that can.

The executors are seen through their port (infra/executors/base.py); the optional abilities
(Killing, Watching) are found once, when the Launcher is built: ``killers`` and ``watchers``.

The running tries of an executor are counted from the fold (the tries with a handle or
started, and the executor their TaskQueued names), never by a counter the adapter keeps.

The launch-after-commit rule: a try is launched once its TaskQueued is committed; its
TaskLaunched (with the handle) is committed afterwards. Launching twice is harmless (the
runner refuses a try it already started, services/runner/core/claim.py), but this keeps it
from happening in the normal course.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from infra.executors.base import Executor, Killing, Watching
from infra.executors.requests import TryRequest
from schemas import TaskKillRequested, TaskLaunched
from services.scheduler.core import TryKey
from services.scheduler.memory import PartitionMemory

log = logging.getLogger("tock.scheduler")


@dataclass(frozen=True, slots=True)
class Launch:
    partition: int
    executor: str
    try_number: int
    request: TryRequest
    queue: str


class Launcher:
    """Launches the owned partitions' queued tries; remembers launches not yet committed."""

    def __init__(self, executors: Mapping[str, Executor], parallelism: Mapping[str, int], scheduler_id: str) -> None:
        self.executors = executors
        # The optional abilities, found once (infra/executors/base.py): who can kill, who watches.
        self.killers: dict[str, Killing] = {name: executor for name, executor in executors.items()
                                            if isinstance(executor, Killing)}
        self.watchers: list[Watching] = [executor for executor in executors.values() if isinstance(executor, Watching)]
        self.parallelism = parallelism  # executor -> tries it runs at once
        self.scheduler_id = scheduler_id
        self.in_flight: dict[TryKey, tuple[int, str]] = {}  # launched, TaskLaunched not yet committed
        self._unknown: set[str] = set()

    def launch_ready(self, memories: Iterable[PartitionMemory]) -> list[tuple[int, TaskLaunched]]:
        """Launch queued tries while their executor has slots; returns (partition, TaskLaunched) to commit."""
        memories = list(memories)
        slots = self._free_slots(memories)
        launches = []
        for memory in memories:
            for key in memory.state.unlaunched:
                if not self._may_take(memory, key, slots):
                    continue  # its executor is full: the request is not even built (10,000 queued cost seconds)
                launch = self._prepare(memory, key)
                if launch is not None and slots[launch.executor] > 0:
                    slots[launch.executor] -= 1
                    launches.append(launch)
        launched = []
        for name in sorted({launch.executor for launch in launches}):
            launched += self._launch_on(name, [launch for launch in launches if launch.executor == name])
        return launched

    def running(self, memories: Iterable[PartitionMemory]) -> Counter[str]:
        """Tries per executor with a handle or started (the fold) or launched and not yet committed."""
        running = Counter(executor for _try, executor in self.in_flight.values())
        for memory in memories:
            for key in memory.state.live:
                instance = memory.state.instance(key)
                if instance is not None and key not in self.in_flight:
                    running[instance.executor] += 1
        return running

    def kill_committed(self, memory: PartitionMemory, event: TaskKillRequested) -> None:
        """After a committed kill request: an executor that can stop the try itself is asked to."""
        instance = memory.state.instance((event.dag_id, event.run_id, event.task_id))
        killer = self.killers.get(instance.executor) if instance is not None else None
        if killer is not None and instance.handle and instance.try_number == event.try_number:
            killer.kill(instance.handle)

    def _free_slots(self, memories: list[PartitionMemory]) -> Counter[str]:
        running = self.running(memories)
        return Counter({name: self.parallelism.get(name, 0) - running[name] for name in self.executors})

    def committed(self, events: Iterable[TaskLaunched]) -> None:
        for event in events:
            self.in_flight.pop((event.dag_id, event.run_id, event.task_id), None)

    def forget(self, memory: PartitionMemory) -> None:
        """The partition was lost: its launches are the new owner's business."""
        for key in [key for key in self.in_flight if memory.state.instance(key) is not None]:
            del self.in_flight[key]

    def _may_take(self, memory: PartitionMemory, key: TryKey, slots: Counter[str]) -> bool:
        """False when the try's executor (one this scheduler runs) has no free slot this turn."""
        instance = memory.state.instance(key)
        return instance is None or instance.executor not in self.executors or slots[instance.executor] > 0

    def _prepare(self, memory: PartitionMemory, key: TryKey) -> Launch | None:
        state = memory.state
        instance, dag = state.instance(key), state.dags.get(key[0])
        if instance is None or dag is None or self.in_flight.get(key, (0,))[0] == instance.try_number \
                or instance.pending:
            return None  # unknown, launched already, or about to be stopped by a command
        if instance.executor not in self.executors:
            if instance.executor not in self._unknown:
                log.error("no %r executor in this scheduler: tries queued on it wait", instance.executor)
                self._unknown.add(instance.executor)
            return None
        task = dag.tasks.get(key[2])
        request = TryRequest(key[0], key[1], key[2], instance.try_number, dag.definition.file_path,
                             task.execution_timeout if task else None, instance.queued_at or 0.0,
                             task.pod_override_json if task else None)
        return Launch(memory.partition, instance.executor, instance.try_number, request, instance.queue)

    def _launch_on(self, name: str, launches: list[Launch]) -> list[tuple[int, TaskLaunched]]:
        try:
            handles = self.executors[name].launch_many([(launch.request, launch.queue) for launch in launches])
        except RuntimeError as error:  # e.g. the launcher died: the tries stay queued, tried again next turn
            log.error("could not launch %d tries on %s: %s", len(launches), name, error)
            return []
        now = time.time()
        launched = []
        for launch, handle in zip(launches, handles, strict=False):  # an executor may take only the first few
            request = launch.request
            self.in_flight[request.key[:3]] = (launch.try_number, name)
            launched.append((launch.partition, TaskLaunched(
                dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id, try_number=launch.try_number,
                executor=name, handle=handle, scheduler_id=self.scheduler_id, queue=launch.queue, at=now)))
        return launched
