"""What the lineage core emits (OpenLineage run events as plain values) and what it remembers per partition.

The core knows nothing of the openlineage-python classes: an adapter (services/lineage/run_events.py)
turns each ``LineageEvent`` into the client's ``RunEvent`` with its facets. Every value here is derived
from the log alone (ids, times, positions), so folding the same records again gives equal events.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

# OpenLineage run event types (the spec's eventType).
START = "START"
RUNNING = "RUNNING"
COMPLETE = "COMPLETE"
FAIL = "FAIL"
ABORT = "ABORT"
TERMINAL = (COMPLETE, FAIL, ABORT)

DAG_JOB = "DAG"  # the JobTypeJobFacet jobType of a DAG run's job
TASK_JOB = "TASK"  # ... of a task instance's

# Where a try is in its OpenLineage life: one START at most, then one terminal event at most.
QUEUED, STARTED, ENDED = "queued", "started", "ended"

# The name space of every runId: uuid5(RUN_IDS, "<job namespace>/<dag>/<run>/...").
RUN_IDS = uuid.UUID("6f0c6b1e-4d0e-5b7a-9a43-2f1c8c4a7b10")


def iso_time(seconds: float) -> str:
    """An event's own time (seconds since the epoch) as OpenLineage's date-time: ISO 8601, UTC, microseconds."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")


def dag_run_uuid(namespace: str, dag_id: str, run_id: str, incarnation: int) -> str:
    """The OpenLineage runId of a DAG run's ``incarnation`` (0, then one more per reopening by a clear)."""
    return str(uuid.uuid5(RUN_IDS, f"{namespace}/{dag_id}/{run_id}/{incarnation}"))


def try_uuid(namespace: str, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """The OpenLineage runId of one try of a task instance."""
    return str(uuid.uuid5(RUN_IDS, f"{namespace}/{dag_id}/{run_id}/{task_id}/{map_index}/{try_number}"))


@dataclass(frozen=True, slots=True)
class JobRef:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class RunRef:
    """An OpenLineage run: its job and its runId."""

    job: JobRef
    run_id: str


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """An asset as an OpenLineage dataset (services/lineage/core/datasets.py names it)."""

    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Failure:
    """What the errorMessage facet says: the message, and the Python traceback when there is one."""

    message: str
    stack_trace: str = ""


@dataclass(frozen=True, slots=True)
class TockFacts:
    """Which Tock run or try a lineage event is about, what Tock recorded (``state``), and the record of
    tock.events it comes from: ``partition``, ``offset`` and its ``index`` among the events that record
    gave. The position is unique per event and grows in the log's order: sinks resume after it."""

    dag_id: str
    dag_run_id: str
    task_id: str  # "" for a DAG run
    map_index: int  # -1: not mapped (or a DAG run)
    try_number: int  # 0 for a DAG run
    incarnation: int  # of the DAG run: 0, then one more per reopening
    state: str  # Tock's word for the change: "created", "started", "succeeded", "declared_dead"...
    partition: int
    offset: int
    index: int

    @property
    def position(self) -> tuple[int, int]:
        """(offset, index) in its partition."""
        return self.offset, self.index


@dataclass(frozen=True, slots=True)
class LineageEvent:
    """One OpenLineage run event, as plain values."""

    event_type: str  # START, RUNNING, COMPLETE, FAIL or ABORT
    event_time: float  # the Tock event's own ``at``
    run: RunRef
    job_type: str  # DAG_JOB or TASK_JOB
    tock: TockFacts
    parent: RunRef | None = None  # a try's DAG run (also its root)
    nominal_start: float | None = None
    nominal_end: float | None = None
    failure: Failure | None = None
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[DatasetRef, ...] = ()

    @property
    def dedup_key(self) -> str:
        """What identifies this state change for a receiver that deduplicates (at-least-once sinks)."""
        return f"{self.run.run_id}/{self.event_type}/{iso_time(self.event_time)}"


@dataclass(frozen=True, slots=True)
class Position:
    """Where the record being folded is: its partition and offset of tock.events."""

    partition: int
    offset: int


# -- what a partition's fold remembers ---------------------------------------------------------------

@dataclass(slots=True)
class TryLineage:
    """The latest try of a task instance: where it is in its OpenLineage life, its outcome, its context."""

    try_number: int
    phase: str = QUEUED
    outcome: str = ""  # COMPLETE, FAIL or ABORT once ENDED
    nominal_start: float | None = None
    nominal_end: float | None = None
    inputs: tuple[DatasetRef, ...] = ()


@dataclass(slots=True)
class RunLineage:
    """A DAG run: its current incarnation, whether it is open, its logical date and the datasets its tries
    read and wrote in this incarnation; its task instances' latest tries (kept after it ends: a clear may
    reopen it, and a late outcome of an ended try must still be told from a new one)."""

    logical_date: float | None
    incarnation: int = 0
    open: bool = True
    triggers: tuple[DatasetRef, ...] = ()  # the assets whose events created it (an asset-triggered run)
    inputs: list[DatasetRef] = field(default_factory=list)
    outputs: list[DatasetRef] = field(default_factory=list)
    tries: dict[str, TryLineage] = field(default_factory=dict)  # by instance name (task, or task[N])


@dataclass(slots=True)
class LineageState:
    """One partition's fold: its DAG runs by (dag_id, run_id)."""

    runs: dict[tuple[str, str], RunLineage] = field(default_factory=dict)
    folded: int = 0  # records folded (to say how much a replay covered)


def add_unique(found: list[DatasetRef], more: tuple[DatasetRef, ...]) -> None:
    """Append the datasets of ``more`` not in ``found`` yet, in order."""
    for dataset in more:
        if dataset not in found:
            found.append(dataset)
