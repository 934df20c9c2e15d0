"""Side effects after a commit: launching queued tries on their executors, bounded by each
executor's parallelism (highest priority first), and stopping killed or dead tries on executors that can.

The executors are seen through their port (infra/executors/base.py); the optional abilities
(Killing, Watching) are found once, when the Launcher is built: ``killers`` and ``watchers``.

The running tries of an executor are counted from the fold (the tries with a handle or
started, and the executor their TaskQueued names), never by a counter the adapter keeps.

The launch-after-commit rule: a try is launched once its TaskQueued is committed; its
TaskLaunched (with the handle) is committed afterwards; a try its executor refused for good (a
pod the API server refuses) gets a TaskFailed with the refusal's reason instead, and its
retries apply: one refused try never holds up the others. Launching twice is harmless (the
runner refuses a try it already started, services/runner/core/claim.py), but this keeps it
from happening in the normal course.

Side effects of our own decisions wait until they are read back and folded (memory.py: the state
is the fold of the log in its order). Dead means stopped: once our TaskKillRequested or
TaskDeclaredDead of a try is read back, the try's executor is asked to stop its handle (Celery's
revoke, a pod's delete), if it can (:func:`handle_to_stop`, a rule over the fold). The runner
obeys both through the log too; the executor's stop reaches a runner that cannot read the log.
Stops wait on the network, so they run on a thread of their own (:class:`Stopping`): the main
loop never waits on one.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from infra.executors.base import Executor, Killing, LaunchRefused, Watching
from infra.executors.requests import TryRequest
from schemas import Event, TaskDeclaredDead, TaskFailed, TaskKillRequested, TaskLaunched
from services.scheduler.core import TryKey
from services.scheduler.core.priorities import launch_order
from services.scheduler.core.stops import Stop, handle_to_stop
from services.scheduler.memory import PartitionMemory

log = logging.getLogger("tock.scheduler")

STOP_QUEUE = 10_000  # stops waiting for the stopping thread at most; more are dropped (and logged)
STOP_ATTEMPTS = 5    # a stop that fails is asked again, after 1, 2, 4, 8 s
STOP_RETRY_FIRST = 1.0


@dataclass(frozen=True, slots=True)
class Launch:
    partition: int
    executor: str
    try_number: int
    request: TryRequest
    queue: str


@dataclass(frozen=True, slots=True)
class InFlight:
    """A try launched whose TaskLaunched is not folded yet."""

    partition: int
    try_number: int
    executor: str


class Stopping:
    """Stops (Celery revokes, pod deletes) on a thread of their own, so the main loop never waits on
    Redis or an API server. The queue is bounded: a stop that finds it full is dropped and logged (the
    runner still obeys the log). A stop that fails is logged and asked again after a backoff, up to
    STOP_ATTEMPTS times."""

    def __init__(self, killers: Mapping[str, Killing], capacity: int = STOP_QUEUE) -> None:
        self._killers, self._capacity = killers, capacity
        self._asked: queue.Queue[Stop] = queue.Queue(capacity)
        self._again: list[tuple[float, int, int, Stop]] = []  # (due, order, attempt, stop): a heap
        self._order = itertools.count()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None  # started by the first stop asked for

    def ask(self, stop: Stop) -> None:
        """Stop this handle soon; never waits."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tock-stops", daemon=True)
            self._thread.start()
        try:
            self._asked.put_nowait(stop)
        except queue.Full:
            log.error("%d stops wait already: not stopping %s on %s (its runner still obeys the log)",
                      self._capacity, stop.handle, stop.executor)

    def close(self, timeout: float = 2.0) -> None:
        """Stop asking (stops not made yet are dropped: the runners obey the log)."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._closed.is_set():
            while self._again and self._again[0][0] <= time.monotonic():
                _due, _order, attempt, stop = heapq.heappop(self._again)
                self._stop(stop, attempt)
            wait = min(0.5, max(0.0, self._again[0][0] - time.monotonic())) if self._again else 0.5
            try:
                stop = self._asked.get(timeout=wait)
            except queue.Empty:
                continue
            self._stop(stop, 1)

    def _stop(self, stop: Stop, attempt: int) -> None:
        try:
            stopped = self._killers[stop.executor].kill(stop.handle, at_once=stop.at_once)
        except Exception as error:  # noqa: BLE001 - an adapter that raised: logged, asked again like a failure
            log.warning("stopping %s on %s raised %r", stop.handle, stop.executor, error)
            stopped = False
        if stopped:
            return
        if attempt >= STOP_ATTEMPTS or len(self._again) >= self._capacity:
            log.error("could not stop %s on %s (%d attempts); its runner still obeys the log",
                      stop.handle, stop.executor, attempt)
            return
        due = time.monotonic() + STOP_RETRY_FIRST * 2 ** (attempt - 1)
        heapq.heappush(self._again, (due, next(self._order), attempt + 1, stop))


def _in_launch_order(memories: list[PartitionMemory], free: int) -> list[tuple[PartitionMemory, TryKey]]:
    """The queued tries of the settled partitions (an unsettled one's may be over already, by our
    decisions not read back), in the order they go in (core/priorities.py: highest priority first
    when there are more than ``free`` slots)."""
    settled = {memory.partition: memory for memory in memories if not memory.awaiting}
    order = launch_order({partition: memory.state for partition, memory in settled.items()}, free)
    return [(settled[partition], key) for partition, key in order]


class Launcher:
    """Launches the owned partitions' queued tries, highest priority first when their executors are
    short of slots; remembers launches not yet committed."""

    def __init__(self, executors: Mapping[str, Executor], parallelism: Mapping[str, int], scheduler_id: str) -> None:
        self.executors = executors
        # The optional abilities, found once (infra/executors/base.py): who can kill, who watches.
        self.killers: dict[str, Killing] = {name: executor for name, executor in executors.items()
                                            if isinstance(executor, Killing)}
        self.watchers: list[Watching] = [executor for executor in executors.values() if isinstance(executor, Watching)]
        self.parallelism = parallelism  # executor -> tries it runs at once
        self.scheduler_id = scheduler_id
        self.in_flight: dict[TryKey, InFlight] = {}  # launched, TaskLaunched not folded yet
        self.refused: dict[TryKey, int] = {}  # try refused by its executor, its TaskFailed not yet folded
        self._unknown: set[str] = set()
        self.stopping = Stopping(self.killers) if self.killers else None

    def launch_ready(self, memories: Iterable[PartitionMemory]) -> list[tuple[int, TaskLaunched | TaskFailed]]:
        """Launch queued tries while their executor has slots; returns (partition, TaskLaunched) to commit,
        and (partition, TaskFailed) for the tries their executor refused."""
        memories = list(memories)
        self._forget_refusals_folded(memories)
        self._forget_launches_folded(memories)
        slots = self._free_slots(memories)
        launches = []
        for memory, key in _in_launch_order(memories, sum(max(free, 0) for free in slots.values())):
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
        """Tries per executor with a handle or started (the fold) or launched and not yet folded."""
        running = Counter(launch.executor for launch in self.in_flight.values())
        for memory in memories:
            for key in memory.state.live:
                instance = memory.state.instance(key)
                if instance is not None and key not in self.in_flight:
                    running[instance.executor] += 1
        return running

    def read_back(self, ours: Iterable[tuple[PartitionMemory, Event]]) -> None:
        """Our decisions just read back and folded: for a kill request or a death, an executor that can
        stop the try itself is asked to, on the stopping thread (the main loop does not wait)."""
        for memory, event in ours:
            if isinstance(event, TaskKillRequested | TaskDeclaredDead):
                stop = handle_to_stop(memory.state, event, self.killers)
                if stop is not None and self.stopping is not None:
                    self.stopping.ask(stop)

    def close(self) -> None:
        """Let the stopping thread go (the executors are closed by their owner)."""
        if self.stopping is not None:
            self.stopping.close()

    def _free_slots(self, memories: list[PartitionMemory]) -> Counter[str]:
        running = self.running(memories)
        return Counter({name: self.parallelism.get(name, 0) - running[name] for name in self.executors})

    def forget(self, memory: PartitionMemory) -> None:
        """The partition was lost: its launches are the new owner's business."""
        self.in_flight = {key: launch for key, launch in self.in_flight.items()
                          if launch.partition != memory.partition}

    def _may_take(self, memory: PartitionMemory, key: TryKey, slots: Counter[str]) -> bool:
        """False when the try's executor (one this scheduler runs) has no free slot this turn."""
        instance = memory.state.instance(key)
        return instance is None or instance.executor not in self.executors or slots[instance.executor] > 0

    def _prepare(self, memory: PartitionMemory, key: TryKey) -> Launch | None:
        state = memory.state
        instance, dag = state.instance(key), state.dags.get(key[0])
        if instance is None or dag is None or key in self.in_flight \
                or self.refused.get(key) == instance.try_number or instance.pending:
            return None  # unknown, launched or refused already, or about to be stopped by a command
        if instance.executor not in self.executors:
            if instance.executor not in self._unknown:
                log.error("no %r executor in this scheduler: tries queued on it wait", instance.executor)
                self._unknown.add(instance.executor)
            return None
        task = dag.tasks.get(instance.task_id)
        request = TryRequest(key[0], key[1], instance.task_id, instance.try_number, dag.definition.file_path,
                             task.execution_timeout if task else None, instance.queued_at or 0.0,
                             task.pod_override_json if task else None, instance.map_index,
                             memory.queued_offset(key, instance.try_number))
        return Launch(memory.partition, instance.executor, instance.try_number, request, instance.queue)

    def _launch_on(self, name: str, launches: list[Launch]) -> list[tuple[int, TaskLaunched | TaskFailed]]:
        try:
            results = self.executors[name].launch_many([(launch.request, launch.queue) for launch in launches])
        except RuntimeError as error:  # e.g. the launcher died: the tries stay queued, tried again next turn
            log.error("could not launch %d tries on %s: %s", len(launches), name, error)
            return []
        now = time.time()
        decided: list[tuple[int, TaskLaunched | TaskFailed]] = []
        for launch, result in zip(launches, results, strict=False):  # past the answer's end: not launched yet
            request = launch.request
            if isinstance(result, LaunchRefused):
                self.refused[request.key[:3]] = launch.try_number
                decided.append((launch.partition, TaskFailed(
                    dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id, map_index=request.map_index,
                    try_number=launch.try_number, runner_id="", error=result.reason, at=now)))
            elif result is not None:
                self.in_flight[request.key[:3]] = InFlight(launch.partition, launch.try_number, name)
                decided.append((launch.partition, TaskLaunched(
                    dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id, map_index=request.map_index,
                    try_number=launch.try_number, executor=name, handle=result, scheduler_id=self.scheduler_id,
                    queue=launch.queue, at=now)))
        return decided

    def _forget_launches_folded(self, memories: list[PartitionMemory]) -> None:
        """A launch is in flight until its TaskLaunched is folded (the try leaves the unlaunched ones),
        or its try is over, or its partition was lost."""
        by_partition = {memory.partition: memory for memory in memories}
        self.in_flight = {key: launch for key, launch in self.in_flight.items()
                          if (memory := by_partition.get(launch.partition)) is not None
                          and key in memory.state.unlaunched
                          and (instance := memory.state.instance(key)) is not None
                          and instance.try_number == launch.try_number}

    def _forget_refusals_folded(self, memories: list[PartitionMemory]) -> None:
        """A refused try is not launched again until its TaskFailed is folded (it then leaves the
        unlaunched tries); a refusal of a partition lost goes with it."""
        waiting = {key: number for memory in memories for key in memory.state.unlaunched
                   if (instance := memory.state.instance(key)) is not None
                   and self.refused.get(key) == (number := instance.try_number)} if self.refused else {}
        self.refused = waiting
