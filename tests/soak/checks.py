"""The soak's checks: small pure functions over plain values (decoded events in log order, the
heartbeats a recorder read, the marker files user code left), each returning the violations
it found, named. Nothing here reads the log, the disk or the clock; tests/unit/test_soak_checks.py
feeds each a good and a bad history.

The events are the schema objects the codec decodes (``schemas.decode``), in log order within a
partition (a run's events all live in its DAG's partition, so per run that order is total).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas import (
    CommandRejected,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DeadlineMissed,
    TaskDeclaredDead,
    TaskHeartbeat,
    TaskQueued,
    TaskStarted,
    TriggerDagRun,
)
from schemas.runs import manual_run_id

TryKey = tuple[str, str, str, int]  # dag_id, run_id, task_id, try_number


@dataclass(frozen=True)
class Violation:
    """One broken promise: ``check`` names the promise, ``detail`` the run / try and what happened."""

    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


@dataclass(frozen=True)
class Marker:
    """One start of a try's user code, as the user code wrote it down (one file per start)."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    pid: int
    at: float

    @property
    def key(self) -> TryKey:
        return (self.dag_id, self.run_id, self.task_id, self.try_number)


def try_key(event: TaskQueued | TaskStarted | TaskHeartbeat | TaskDeclaredDead) -> TryKey:
    return (event.dag_id, event.run_id, event.task_id, event.try_number)


# -- every triggered run ended ---------------------------------------------------------------


def runs_not_ended(events: Iterable[object]) -> list[Violation]:
    """Every run that was asked for (a TriggerDagRun the scheduler did not reject) or created must
    have been created and must end: its last lifecycle event (created / reopened by a clear /
    finished) is a DagRunFinished."""
    asked: dict[tuple[str, str], str] = {}
    rejected: set[str] = set()
    last: dict[tuple[str, str], object] = {}
    for event in events:
        match event:
            case TriggerDagRun():
                asked.setdefault((event.dag_id, manual_run_id(event.request_id)), event.request_id)
            case CommandRejected():  # request ids are unique per command: a rejected trigger made no run
                rejected.add(event.request_id)
            case DagRunCreated() | DagRunReopened() | DagRunFinished():
                last[(event.dag_id, event.run_id)] = event
    found = [Violation("run-never-created", f"{dag_id} / {run_id}: triggered (request {request_id}) but no "
                       "DagRunCreated and no CommandRejected") for (dag_id, run_id), request_id in sorted(asked.items())
             if (dag_id, run_id) not in last and request_id not in rejected]
    found += [Violation("run-not-ended", f"{dag_id} / {run_id}: its last lifecycle event is "
                        f"{type(event).__name__} at {event.at:.3f}")
              for (dag_id, run_id), event in sorted(last.items()) if not isinstance(event, DagRunFinished)]
    return found


def triggers_lost(acknowledged: Iterable[str], events: Iterable[object]) -> list[Violation]:
    """A trigger the CLI reported as appended (it printed the run id) is in the log."""
    logged = {event.request_id for event in events if isinstance(event, TriggerDagRun)}
    return [Violation("trigger-lost", f"request {request_id} was acknowledged by `tock dags trigger` "
                      "but no TriggerDagRun carries it") for request_id in sorted(set(acknowledged) - logged)]


# -- user code ran at most once per try ------------------------------------------------------


def tries_run_twice(markers: Iterable[Marker]) -> list[Violation]:
    """Each (dag, run, task, try) started its user code at most once, across every host and executor."""
    starts: dict[TryKey, list[Marker]] = defaultdict(list)
    for marker in markers:
        starts[marker.key].append(marker)
    return [Violation("try-ran-twice", f"{_name(key)}: user code started {len(found)} times "
                      f"(pids {', '.join(str(m.pid) for m in sorted(found, key=lambda m: m.at))}, "
                      f"at {', '.join(f'{m.at:.3f}' for m in sorted(found, key=lambda m: m.at))})")
            for key, found in sorted(starts.items()) if len(found) > 1]


# -- no try declared dead while it was heartbeating ------------------------------------------


def deaths_while_heartbeating(events: Iterable[object], heartbeats: Iterable[TaskHeartbeat],
                              timeout: float) -> list[Violation]:
    """No try was declared dead while its runner was heartbeating.

    A try's signs of life are the ``at`` of its TaskStarted and of each of its TaskHeartbeats (the
    runner's clock when it wrote them, whenever the broker got them: a heartbeat held back by an
    outage still proves the runner was alive then). A TaskDeclaredDead at time T (its ``at``, the
    scheduler's clock; one machine, one clock) is wrongful when the try showed life at or before T
    and again after T, and those two signs (the last before, the first after) are less than
    ``timeout`` (TOCK_TASK_HEARTBEAT_TIMEOUT) apart: its runner never fell silent for a whole
    timeout around the declaration, so neither the deadline nor an executor's verdict (which may
    only hasten the end of a runner that is really gone) had a reason to end it.

    A runner frozen or cut off for longer than the timeout, declared dead and heard from again
    afterwards, is rightly declared (the gap is at least the timeout); so is one that is never
    heard from again (killed, its pod or worker lost), however soon.
    """
    lives: dict[TryKey, list[float]] = defaultdict(list)
    deaths: list[TaskDeclaredDead] = []
    for event in events:
        match event:
            case TaskStarted():
                lives[try_key(event)].append(event.at)
            case TaskDeclaredDead():
                deaths.append(event)
    for beat in heartbeats:
        lives[try_key(beat)].append(beat.at)
    found = []
    for death in deaths:
        signs = lives.get(try_key(death), [])
        before = max((at for at in signs if at <= death.at), default=None)
        after = min((at for at in signs if at > death.at), default=None)
        if before is not None and after is not None and after - before < timeout:
            found.append(Violation("dead-while-heartbeating", (
                f"{_name(try_key(death))} declared dead at {death.at:.3f} by {death.scheduler_id} "
                f"({death.reason}; last heartbeat it saw {death.last_heartbeat_at}) while its runner "
                f"showed life {death.at - before:.1f} s before and {after - death.at:.1f} s after "
                f"(gap {after - before:.1f} s < timeout {timeout:g} s)")))
    return found


# -- at most one DeadlineMissed per run ------------------------------------------------------


def deadlines_missed_twice(events: Iterable[object]) -> list[Violation]:
    """The monitor wrote at most one DeadlineMissed per run."""
    counts = Counter((event.dag_id, event.run_id) for event in events if isinstance(event, DeadlineMissed))
    return [Violation("deadline-missed-twice", f"{dag_id} / {run_id}: {count} DeadlineMissed")
            for (dag_id, run_id), count in sorted(counts.items()) if count > 1]


# -- the projections agree with a rebuild from the log ---------------------------------------


def projections_disagree(exit_code: int, output: str, tail_lines: int = 15) -> list[Violation]:
    """`tock projections rebuild --verify` exited 0 (the live tables equal a fold of the log)."""
    if exit_code == 0:
        return []
    tail = " | ".join(line for line in output.strip().splitlines()[-tail_lines:])
    return [Violation("projections-disagree", f"`tock projections rebuild --verify` exited {exit_code}: {tail}")]


def projections_behind(events: Iterable[object], rows: Iterable[dict]) -> list[Violation]:
    """Once the load drained and the projector had time to catch up, the tables (rows of
    `tock runs list --json`) show every run the log ended in the state its last DagRunFinished says.
    (`--verify` compares the tables only up to the offsets they reached: this says they reached the end.)"""
    ended: dict[tuple[str, str], str | None] = {}
    for event in events:
        match event:
            case DagRunFinished():
                ended[(event.dag_id, event.run_id)] = event.state
            case DagRunCreated() | DagRunReopened():
                ended[(event.dag_id, event.run_id)] = None
    shown = {(row.get("dag_id"), row.get("run_id")): row.get("state") for row in rows}
    return [Violation("projections-behind", f"{dag_id} / {run_id}: the log ended it {state}, the tables say "
                      f"{shown.get((dag_id, run_id), 'nothing')}")
            for (dag_id, run_id), state in sorted(ended.items())
            if state is not None and shown.get((dag_id, run_id)) != state]


# -- counts for the report -------------------------------------------------------------------


def runs_and_tries(events: Sequence[object]) -> tuple[int, int]:
    """(runs created, distinct tries queued)."""
    runs = {(event.dag_id, event.run_id) for event in events if isinstance(event, DagRunCreated)}
    tries = {try_key(event) for event in events if isinstance(event, TaskQueued)}
    return len(runs), len(tries)


def _name(key: TryKey) -> str:
    dag_id, run_id, task_id, try_number = key
    return f"{dag_id} / {run_id} / {task_id} try {try_number}"
