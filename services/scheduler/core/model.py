"""The scheduler's memory of one partition: DAGs, open runs and their task instances.

Only ``evolve`` changes it. Of finished history it holds the newest finished runs of each DAG
(for clear, mark and backfill), a compact trace of the older ones, and the latest request ids
(core/retention.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import TypeAlias

from schemas import (
    AssetEventQueued,
    AssetEventRecorded,
    ClearTask,
    DagDefinition,
    DagsTopicEvent,
    EventsTopicEvent,
    ExternalWaitRequested,
    HeartbeatsTopicEvent,
    InletEventDelivered,
    PodFinished,
    RequestBackfill,
    TaskAdopted,
    TaskDeclaredDead,
    TaskDefinition,
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskPoked,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TriggerDagRun,
)
from services.scheduler.core.forgotten import ForgottenRuns, RequestIds, Retention
from services.scheduler.core.segments import Segment, walk_segments
from services.scheduler.core.timers import Timers

# Task-instance states.
NONE = "none"                      # not queued yet in this run
QUEUED = "queued"                  # a try was decided (TaskQueued); launched when it has a handle
RUNNING = "running"                # the runner reported TaskStarted
SUCCESS = "success"
FAILED = "failed"                  # the current try failed; retried if retries remain
UP_FOR_RETRY = "up_for_retry"      # a new try may be queued from not_before (a retry, or a sensor's next poke)
POKED = "poked"                    # a sensor's poke was not met: the owner decides its next poke or its timeout
DEFERRED = "deferred"              # an external task sensor waits on another DAG's owner (no try runs)
UPSTREAM_FAILED = "upstream_failed"
SKIPPED = "skipped"                # marked skipped, or an upstream task was skipped
REMOVED = "removed"                # the task (or its DAG) is gone from the DAG files

ACTIVE = frozenset({QUEUED, RUNNING})
ENDED = frozenset({SUCCESS, FAILED, UPSTREAM_FAILED, SKIPPED, REMOVED})  # a run ends when all its tasks have

# What happens to an instance once its current try has ended (a running try is stopped first).
CLEAR = "clear"          # reset for a new try (TaskCleared)
KILL = "kill"            # ends as killed: failed, not retried
REMOVE = "remove"        # ends as removed (its task or DAG is gone)
MARK_PREFIX = "mark:"    # "mark:success" etc.: ends in the marked state

TryKey = tuple[str, str, str]      # (dag_id, run_id, instance key); the try number lives in the instance


def instance_key(task_id: str, map_index: int = -1) -> str:
    """A task instance's key in its run (``DagRun.tasks``, a TryKey's last part): the task id, and
    for instance N of a mapped task ``task_id|N`` ("|" is in no task id, so keys never collide)."""
    return task_id if map_index < 0 else f"{task_id}|{map_index}"
RunKey = tuple[str, str]           # (dag_id, run_id)


@dataclass(frozen=True, slots=True)
class DagTombstone:
    """A DAG's definition was deleted from tock.dags (its file is gone). Not an event: a tombstone."""

    dag_id: str


# -- what the core folds -----------------------------------------------------------------------

SchedulerEvent: TypeAlias = EventsTopicEvent | HeartbeatsTopicEvent | DagsTopicEvent | DagTombstone
"""What ``evolve`` folds: one partition of tock.events, tock.heartbeats and tock.dags (a deleted
DAG's tombstone included)."""

TryEvent: TypeAlias = (TaskLaunched | TaskStarted | TaskHeartbeat | TaskAdopted | TaskSucceeded | TaskFailed
                       | TaskTrySkipped | TaskPoked | TaskDeclaredDead | TaskKillRequested | TaskKilled | PodFinished)
"""Events about one try of a task instance (they name its try number)."""

RunnerEvent: TypeAlias = (TaskHeartbeat | TaskSucceeded | TaskFailed | TaskTrySkipped | TaskPoked | TaskStarted
                          | TaskKilled)
"""What a try's runner reports: each names the runner (``runner_id``). (Also checked with isinstance
on every heartbeat: the most frequent first.)"""

TryEnded: TypeAlias = TaskSucceeded | TaskFailed | TaskTrySkipped | TaskPoked | TaskDeclaredDead
"""The end of a try: its runner's outcome, or the owner's verdict that it died."""


@dataclass(slots=True)
class DagEntry:
    """A DAG as parsed, with what deciding needs precomputed once per definition."""

    definition: DagDefinition
    fingerprint: str
    first_seen_at: float
    tasks: dict[str, TaskDefinition]
    order: tuple[str, ...]  # topological: every task after its upstream
    # Task id -> the short circuits upstream of it that skip everything downstream when false.
    short_circuits: dict[str, tuple[str, ...]]
    leaves: frozenset[str]  # the tasks whose states decide the run's (Airflow's: teardowns left out)
    priorities: dict[str, int]  # each task's priority, as its weight rule adds the weights up (priorities.py)
    alike: dict[str, Alike | None]  # each task's key for sharing its verdict in a walk (alike_keys)
    inlet_uris: tuple[str, ...]  # the assets its tasks read as inlets, sorted
    segments: dict[str, Segment]  # first task -> plain tasks alike next to it in ``order`` (segments.py)

    @staticmethod
    def of(definition: DagDefinition, fingerprint: str, first_seen_at: float) -> DagEntry:
        from services.scheduler.core.priorities import priorities_of

        tasks = {task.task_id: task for task in definition.tasks}
        order = topological_order(tasks)
        short_circuits = short_circuits_above(order, tasks)
        priorities, alike = priorities_of(tasks, order), alike_keys(tasks, short_circuits)
        return DagEntry(definition, fingerprint, first_seen_at, tasks, order, short_circuits,
                        run_state_leaves(tasks), priorities, alike,
                        tuple(sorted({asset.uri for task in definition.tasks for asset in task.inlets})),
                        walk_segments(order, tasks, alike, priorities))


Alike: TypeAlias = tuple[str, tuple[str, ...]]
"""(trigger rule, upstream task ids): tasks whose verdicts one walk may share (trigger_rules.judged_alike)."""


def alike_keys(tasks: dict[str, TaskDefinition], short_circuits: dict[str, tuple[str, ...]]) -> dict[str, Alike | None]:
    """Task id -> its Alike key; None for a task whose verdict depends on more than its rule and its upstreams'
    states: one that runs within setups, or below a short circuit (unless a teardown, which no short circuit
    skips)."""
    return {task_id: None if task.setups or (task_id in short_circuits and not task.is_teardown)
            else (task.trigger_rule, tuple(task.upstream)) for task_id, task in tasks.items()}


@dataclass(slots=True)
class TaskInstance:
    """One task of one run; ``try_number`` is its current (or last) try, 0 before the first."""

    task_id: str
    state: str = NONE
    try_number: int = 0
    executor: str = ""       # from TaskQueued only: never from what a worker reports
    queue: str = ""
    owner: str = ""          # scheduler that queued or last adopted the current try
    handle: str = ""         # from the try's first TaskLaunched: written once
    runner_id: str = ""      # the runner whose TaskStarted came first in the log: the only one that runs
    queued_at: float | None = None
    launched_at: float | None = None
    started_at: float | None = None
    last_heartbeat_at: float | None = None
    adopted_at: float | None = None
    ended_at: float | None = None
    retryable: bool = True   # False when marked failed by hand
    not_before: float | None = None
    pending: str = ""        # CLEAR, KILL, REMOVE or MARK_PREFIX + state, once the try has ended
    pending_request: str = ""  # the request id of the command that set ``pending``
    kill_requested: bool = False  # a TaskKillRequested of the current try was committed
    pod_ended: str = ""      # the current try's pod ended with no outcome from its runner (PodFinished): why
    values_json: str = ""    # what its succeeded try returned and pushed (TaskSucceeded.values_json)
    follow_json: str = ""    # a branch's or short circuit's choice: its success's ``follow`` as JSON ("" none)
    map_index: int = -1      # which instance of a mapped task; -1: not mapped, or a mapped task as a whole
    map_count: int = -1      # a mapped task as a whole: its TaskMapExpanded count (-1: not expanded yet)
    # A sensor (core/sensors.py): its tries that were pokes not met (they use no retry), the pokes of its
    # current wait and when that wait began (its timeout counts from then), and whether its last poke
    # waited its timeout in the try (mode "poke").
    pokes: int = 0
    wait_pokes: int = 0
    waiting_since: float | None = None
    poke_timed_out: bool = False
    # A task that names a pool (core/pools.py): the try number whose slots it asked for, and was granted.
    pool_asked: int = 0
    pool_granted: int = 0
    # The try whose success was deferred for the run it triggered (wait_for_completion), or marked: a
    # success of the current try with this lower is waited on first (core/external.py). Set by folds of
    # the log only, so a replay that reads the definition late decides the same.
    deferred_try: int = 0

    @property
    def key(self) -> str:
        return instance_key(self.task_id, self.map_index)


@dataclass(slots=True)
class DagRun:
    dag_id: str
    run_id: str
    logical_date: float
    run_type: str
    conf_json: str
    created_at: float
    tasks: dict[str, TaskInstance] = field(default_factory=dict)
    finished_state: str = ""   # "success" / "failed" once finished
    reopened_by: str | None = None  # request id of the clear that reopened it, until DagRunReopened
    reopened_at: float | None = None  # its latest DagRunReopened: its dagrun_timeout counts from then
    timed_out_at: float | None = None  # its DagRunTimedOut (core/timeouts.py), until it is reopened
    asset_events_json: str = ""  # an asset-triggered run's triggering events (its tries' context)

    def instance(self, task_id: str, map_index: int = -1) -> TaskInstance:
        """The task instance, created in state NONE on first use."""
        key = instance_key(task_id, map_index)
        found = self.tasks.get(key)
        if found is None:
            found = self.tasks[key] = TaskInstance(task_id, map_index=map_index)
        return found


# -- finished runs ---------------------------------------------------------------------------
# Kept for clears, marks and repeated triggers, most never looked at again. Each is kept as the
# rows of its fields (``PackedRun``) and built into a DagRun when something asks for it: a long
# history holds half a million finished task instances, which cost a snapshot seconds to write
# and read as objects. A run asked for (``get``, ``pop``, ``[]``, ``values``) is built then and
# kept built until it is stored again.

RUN_FIELDS = tuple(item.name for item in fields(DagRun) if item.name != "tasks")
INSTANCE_FIELDS = tuple(item.name for item in fields(TaskInstance))
run_row, instance_row = attrgetter(*RUN_FIELDS), attrgetter(*INSTANCE_FIELDS)


@dataclass(frozen=True, slots=True)
class PackedRun:
    """A finished run as rows: the run's fields (but ``tasks``) and each task instance's fields,
    in declaration order."""

    # Rows of mixed types. The text of these annotations is part of the snapshot's model fingerprint
    # (snapshot.py): a new spelling would refuse every snapshot written before, so they stay bare.
    run: tuple  # type: ignore[type-arg]  # its text is in the snapshot fingerprint (see above)
    instances: tuple[tuple, ...]  # type: ignore[type-arg]  # its text is in the snapshot fingerprint

    @classmethod
    def of(cls, run: DagRun) -> PackedRun:
        return cls(run_row(run), tuple(map(instance_row, run.tasks.values())))

    @property
    def key(self) -> RunKey:
        return self.run[_DAG_ID], self.run[_RUN_ID]

    @property
    def logical_date(self) -> float:
        return float(self.run[_LOGICAL_DATE])

    @property
    def run_type(self) -> str:
        return str(self.run[_RUN_TYPE])

    @property
    def finished_state(self) -> str:
        return str(self.run[_FINISHED_STATE])

    def build(self) -> DagRun:
        tasks = {instance.key: instance for instance in (TaskInstance(*row) for row in self.instances)}
        return DagRun(**dict(zip(RUN_FIELDS, self.run, strict=False)), tasks=tasks)


class FinishedRuns(MutableMapping[RunKey, DagRun]):
    """RunKey -> DagRun, each stored packed and built on first use; in the order they were stored,
    also per DAG (which the retention forgets first)."""

    __slots__ = ("_by_dag", "_runs")

    def __init__(self, packed: Iterable[PackedRun] = ()) -> None:
        self._runs: dict[RunKey, DagRun | PackedRun] = {}
        self._by_dag: dict[str, dict[RunKey, None]] = {}
        for run in packed:
            self._store(run.key, run)

    def __getitem__(self, key: RunKey) -> DagRun:
        found = self._runs[key]
        if isinstance(found, PackedRun):
            found = self._runs[key] = found.build()
        return found

    def __setitem__(self, key: RunKey, run: DagRun) -> None:
        self._store(key, PackedRun.of(run))

    def __delitem__(self, key: RunKey) -> None:
        del self._runs[key]
        of_dag = self._by_dag[key[0]]
        del of_dag[key]
        if not of_dag:
            del self._by_dag[key[0]]

    def _store(self, key: RunKey, run: DagRun | PackedRun) -> None:
        self._runs[key] = run
        self._by_dag.setdefault(key[0], {})[key] = None

    def packed_of(self, key: RunKey) -> PackedRun:
        """The run as rows, without building it if it is still packed."""
        found = self._runs[key]
        return found if isinstance(found, PackedRun) else PackedRun.of(found)

    def of_dag(self, dag_id: str) -> Iterator[PackedRun]:
        """The DAG's finished runs as rows, in the order they were stored (none built)."""
        for key in self._by_dag.get(dag_id, ()):
            yield self.packed_of(key)

    def count_of(self, dag_id: str) -> int:
        return len(self._by_dag.get(dag_id, ()))

    def oldest_of(self, dag_id: str) -> RunKey | None:
        return next(iter(self._by_dag.get(dag_id, ())), None)

    def __contains__(self, key: object) -> bool:
        return key in self._runs

    def __iter__(self) -> Iterator[RunKey]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (FinishedRuns, dict)):
            return NotImplemented
        return len(self) == len(other) and all(key in other and self[key] == other[key] for key in self)

    def __repr__(self) -> str:
        return f"FinishedRuns({dict(self.items())!r})"

    def packed(self) -> Iterator[PackedRun]:
        """Every run as rows, in order, without building the ones still packed (for snapshots)."""
        for found in self._runs.values():
            yield found if isinstance(found, PackedRun) else PackedRun.of(found)


_DAG_ID, _RUN_ID = RUN_FIELDS.index("dag_id"), RUN_FIELDS.index("run_id")
_LOGICAL_DATE, _RUN_TYPE = RUN_FIELDS.index("logical_date"), RUN_FIELDS.index("run_type")
_FINISHED_STATE = RUN_FIELDS.index("finished_state")


@dataclass(frozen=True, slots=True)
class Rejection:
    """A command the owner cannot apply, to be recorded as CommandRejected."""

    dag_id: str
    command: str
    reason: str


@dataclass(slots=True)
class Backfill:
    """A planned backfill: the logical dates still to create runs for, and its runs."""

    dag_id: str
    dates: list[float]
    reprocess_failed: bool
    conf_json: str
    runs: set[RunKey] = field(default_factory=set)
    cancelled: bool = False
    forgotten_failed: bool = False  # one of its runs failed and was forgotten (retention.py) before it ended


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A DAG the owner decides nothing for (no runs, no tries): why, and which definition it holds
    for (lifted by a definition with another fingerprint, or the DAG's deletion)."""

    reason: str
    fingerprint: str
    file_path: str


# -- pools (core/pools.py) -------------------------------------------------------------------

GrantKey = tuple[str, str, str, str, int, int]  # (pool, dag_id, run_id, task_id, map_index, try_number)


@dataclass(slots=True)
class Ask:
    slots: int
    priority: int
    order: int  # the ledger's count of asks when this one came: older first among equal priorities


@dataclass(slots=True)
class PoolLedger:
    """The pools whose partition this is: their sizes, the asks waiting, the grants held."""

    sizes: dict[str, tuple[int, str]] = field(default_factory=dict)  # pool -> (slots, description)
    asks: dict[GrantKey, Ask] = field(default_factory=dict)
    grants: dict[GrantKey, int] = field(default_factory=dict)  # -> slots
    asked: int = 0  # asks folded so far (their order)

    def occupied(self, pool: str) -> int:
        return sum(slots for key, slots in self.grants.items() if key[0] == pool)


# -- assets (core/assets.py) -----------------------------------------------------------------

OutboxKey = tuple[str, str, str, int, int]  # (dag_id, run_id, task_id, map_index, try_number) of a success
HANDED_KEPT = 10_000  # the asset side remembers this many events handed on (a repeated API request is one)


@dataclass(slots=True)
class AssetLedger:
    """The assets whose partition this is: the DAGs consuming each, the events not handed to them yet,
    and the ids of the latest events handed on (so one recorded twice is handed on once)."""

    consumers: dict[str, dict[str, None]] = field(default_factory=dict)  # uri -> consuming dag ids
    pending: dict[str, AssetEventRecorded] = field(default_factory=dict)  # event id -> not handed on yet
    handed: dict[str, None] = field(default_factory=dict)  # event ids handed on, oldest first
    # Readers: uri -> dag id -> whether the asset's latest events were handed to it (AssetReaderCaughtUp);
    # and the latest events of each asset (at most INLET_EVENTS_KEPT, oldest first), for new readers.
    readers: dict[str, dict[str, bool]] = field(default_factory=dict)
    recent: dict[str, list[AssetEventRecorded]] = field(default_factory=dict)


@dataclass(slots=True)
class AssetSides:
    """A partition's assets: the ledger of those it owns, and its DAGs' sides as producers, consumers and
    readers."""

    ledger: AssetLedger = field(default_factory=AssetLedger)
    outbox: dict[OutboxKey, list[AssetEventRecorded]] = field(default_factory=dict)  # successes' events to record
    registered: dict[str, tuple[str, ...]] = field(default_factory=dict)  # dag_id -> assets it is registered with
    queues: dict[str, dict[str, AssetEventQueued]] = field(default_factory=dict)  # dag_id -> event id -> queued
    reading: dict[str, tuple[str, ...]] = field(default_factory=dict)  # dag_id -> assets it is a reader of
    # dag_id -> uri -> event id -> the latest events of each asset it reads (at most INLET_EVENTS_KEPT)
    inlet_events: dict[str, dict[str, dict[str, InletEventDelivered]]] = field(default_factory=dict)


@dataclass(slots=True)
class SchedulerState:
    """Fold of one partition of tock.dags, tock.events and tock.heartbeats."""

    dags: dict[str, DagEntry] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    runs: dict[RunKey, DagRun] = field(default_factory=dict)
    latest_scheduled: dict[str, float] = field(default_factory=dict)  # dag_id -> logical date
    next_due: dict[str, float | None] = field(default_factory=dict)   # dag_id -> next scheduled run due
    triggers: dict[RunKey, TriggerDagRun] = field(default_factory=dict)  # run not created yet -> request
    finished: FinishedRuns = field(default_factory=FinishedRuns)       # ended runs, for clear and mark
    forgotten: dict[str, ForgottenRuns] = field(default_factory=dict)  # dag_id -> what is left of older ones
    requests: RequestIds = field(default_factory=RequestIds)          # latest command request ids applied
    rejections: dict[str, Rejection] = field(default_factory=dict)    # request id -> to record
    removed_dags: dict[str, DagEntry] = field(default_factory=dict)   # last definition of deleted DAGs
    backfill_requests: dict[str, RequestBackfill] = field(default_factory=dict)  # not planned yet
    backfills: dict[str, Backfill] = field(default_factory=dict)      # planned, not finished
    unlaunched: dict[TryKey, None] = field(default_factory=dict)      # queued tries without a handle
    live: dict[TryKey, None] = field(default_factory=dict)            # tries with a handle or started
    waiting: dict[TryKey, None] = field(default_factory=dict)         # up for retry
    quarantined: dict[str, Quarantine] = field(default_factory=dict)  # dag_id -> why nothing is decided for it
    announced: dict[str, Quarantine] = field(default_factory=dict)    # dag_id -> what its DagQuarantined not
                                                                      # lifted since (in tock.events) says
    pools: PoolLedger = field(default_factory=PoolLedger)              # the pools whose partition this is
    pool_holdings: dict[GrantKey, int] = field(default_factory=dict)  # grants our tries hold, until released
    assets: AssetSides = field(default_factory=AssetSides)              # core/assets.py
    # Sensors' waits on the DAGs of this partition (core/external.py): wait id -> the wait; and those
    # its owner has not read yet.
    external_waits: dict[str, ExternalWaitRequested] = field(default_factory=dict)
    fresh_waits: dict[str, None] = field(default_factory=dict)
    # Recursive clears' clears of other DAGs through markers, not written yet (core/markers.py):
    # request id -> (the cleared DAG, the clears).
    external_clears: dict[str, tuple[str, list[ClearTask]]] = field(default_factory=dict)
    timers: Timers = field(default_factory=Timers, compare=False, repr=False)  # derived: deadlines in heaps
    retention: Retention = field(default_factory=Retention, compare=False, repr=False)  # settings, not state

    def instance(self, key: TryKey) -> TaskInstance | None:
        run = self.runs.get(key[:2])
        return None if run is None else run.tasks.get(key[2])


def logical_date_iso(logical_date: float) -> str:
    """A logical date (seconds since the epoch) as the ISO 8601 text in run ids."""
    return datetime.fromtimestamp(logical_date, UTC).isoformat()


def scheduled_run_id(logical_date_iso: str) -> str:
    return f"scheduled__{logical_date_iso}"


def backfill_run_id(logical_date_iso: str) -> str:
    return f"backfill__{logical_date_iso}"


def topological_order(tasks: dict[str, TaskDefinition]) -> tuple[str, ...]:
    """Task ids with every task after its upstream (Kahn's algorithm; ties by id, so stable)."""
    upstream = {task_id: {up for up in task.upstream if up in tasks} for task_id, task in tasks.items()}
    downstream: dict[str, list[str]] = {task_id: [] for task_id in tasks}
    for task_id, ups in upstream.items():
        for up in ups:
            downstream[up].append(task_id)
    ready = [task_id for task_id, ups in upstream.items() if not ups]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        task_id = heapq.heappop(ready)
        order.append(task_id)
        for down in downstream[task_id]:
            upstream[down].discard(task_id)
            if not upstream[down]:
                heapq.heappush(ready, down)
    # A cycle (the DAG processor refuses those) leaves tasks out: append them, never run them early.
    order.extend(sorted(set(tasks) - set(order)))
    return tuple(order)


def short_circuits_above(order: tuple[str, ...], tasks: dict[str, TaskDefinition]) -> dict[str, tuple[str, ...]]:
    """Task id -> the short circuits upstream of it (transitively) that skip everything downstream
    when false (``ignore_downstream_trigger_rules``); only tasks that have one are listed."""
    above: dict[str, tuple[str, ...]] = {}
    for task_id in order:
        found: dict[str, None] = {}
        for up in tasks[task_id].upstream:
            if up not in tasks:
                continue
            found.update(dict.fromkeys(above.get(up, ())))
            if tasks[up].chooses == "short_circuit" and tasks[up].ignore_downstream_trigger_rules:
                found[up] = None
        if found:
            above[task_id] = tuple(found)
    return above


def run_state_leaves(tasks: dict[str, TaskDefinition]) -> frozenset[str]:
    """The tasks whose states decide a run's: those with nothing downstream but teardowns that may
    fail without failing the run, teardowns themselves left out unless ``on_failure_fail_dagrun``
    (Airflow's rule). A DAG of nothing but such teardowns: its tasks with nothing downstream."""
    downstream: dict[str, list[str]] = {task_id: [] for task_id in tasks}
    for task_id, task in tasks.items():
        for up in task.upstream:
            if up in downstream:
                downstream[up].append(task_id)

    def ignorable(task_id: str) -> bool:
        return tasks[task_id].is_teardown and not tasks[task_id].on_failure_fail_dagrun

    leaves = frozenset(task_id for task_id, downs in downstream.items()
                       if not ignorable(task_id) and all(ignorable(down) for down in downs))
    return leaves or frozenset(task_id for task_id, downs in downstream.items() if not downs)
