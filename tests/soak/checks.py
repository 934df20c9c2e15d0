"""The soak's checks: small pure functions over plain values (decoded events in log order, the
heartbeats a recorder read, the marker files user code left, the DAGs' task dependencies, the
services that ended on their own), each returning the violations it found, named; and a few
counts for the report. Nothing here reads the log, the disk or the clock;
tests/unit/test_soak_checks.py feeds each a good and a bad history.

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
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from schemas.runs import manual_run_id

TryKey = tuple[str, str, str, int]  # dag_id, run_id, task_id, try_number
Outcome = TaskSucceeded | TaskFailed | TaskDeclaredDead | TaskKilled
OUTCOMES = (TaskSucceeded, TaskFailed, TaskDeclaredDead, TaskKilled)
# Slack for the declaration time check: the heartbeat a runner built just before it was frozen
# reaches the log only after the thaw, so the last heartbeat the scheduler could see may be up to a
# couple of heartbeat periods (1 s) older than the last one written.
DECLARATION_GRACE = 3.0


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


@dataclass(frozen=True)
class Exit:
    """A service that ended without the soak killing it: found gone at ``at`` (time.time())."""

    name: str
    kind: str
    code: int | None
    at: float
    log_tail: str = ""


def try_key(event: TaskQueued | TaskLaunched | TaskStarted | TaskHeartbeat | Outcome) -> TryKey:
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
    return [Violation("try-ran-twice", f"{name_of(key)}: user code started {len(found)} times "
                      f"(pids {', '.join(str(m.pid) for m in sorted(found, key=lambda m: m.at))}, "
                      f"at {', '.join(f'{m.at:.3f}' for m in sorted(found, key=lambda m: m.at))})")
            for key, found in sorted(starts.items()) if len(found) > 1]


# -- no try declared dead while it was heartbeating ------------------------------------------


def deaths_while_heartbeating(events: Iterable[object], heartbeats: Iterable[TaskHeartbeat],
                              timeout: float, grace: float = DECLARATION_GRACE) -> list[Violation]:
    """No try was declared dead while its runner was heartbeating.

    A try's signs of life are what its claimant (the runner of its first TaskStarted in log order;
    any runner while none is known) put in the log: the ``at`` of its TaskStarted and of each of its
    TaskHeartbeats (the runner's clock when it wrote them, whenever the broker got them: a
    heartbeat held back by an outage still proves the runner was alive then). A TaskDeclaredDead
    at time T (its ``at``, the scheduler's clock; one machine, one clock) of a try whose runner
    showed life at or before T and again after T (so it was not gone) is wrongful when

    - the last sign before T and the first after are less than ``timeout`` apart: the runner never
      fell silent for a whole timeout around the declaration; or
    - the last sign before T is less than ``timeout - grace`` before T: the runner was silent (frozen,
      cut off) but had not been silent for a timeout yet, so the deadline had not passed, and an
      executor's verdict may only hasten the end of a runner that is really gone.

    A runner frozen or cut off for longer than the timeout, declared dead once the timeout ran out
    and heard from again afterwards, is rightly declared; so is one never heard from again (killed,
    its pod or worker lost), however soon.
    """
    lives: dict[TryKey, list[tuple[str, float]]] = defaultdict(list)  # (runner id, at) of each sign
    claimants: dict[TryKey, str] = {}
    deaths: list[TaskDeclaredDead] = []
    for event in events:
        match event:
            case TaskStarted():
                claimants.setdefault(try_key(event), event.runner_id)
                lives[try_key(event)].append((event.runner_id, event.at))
            case TaskDeclaredDead():
                deaths.append(event)
    for beat in heartbeats:
        lives[try_key(beat)].append((beat.runner_id, beat.at))
    found = []
    for death in deaths:
        key, claimant = try_key(death), claimants.get(try_key(death))
        signs = [at for runner_id, at in lives.get(key, []) if claimant is None or runner_id == claimant]
        before = max((at for at in signs if at <= death.at), default=None)
        after = min((at for at in signs if at > death.at), default=None)
        if before is None or after is None:
            continue
        said = (f"{name_of(key)} declared dead at {death.at:.3f} by {death.scheduler_id} ({death.reason}; last "
                f"heartbeat it saw {death.last_heartbeat_at}) while its runner showed life {death.at - before:.1f} s "
                f"before and {after - death.at:.1f} s after")
        if after - before < timeout:
            found.append(Violation("dead-while-heartbeating",
                                   f"{said} (gap {after - before:.1f} s < timeout {timeout:g} s)"))
        elif death.at - before < timeout - grace:
            found.append(Violation("dead-while-heartbeating",
                                   f"{said}: declared {death.at - before:.1f} s into a silence of "
                                   f"{after - before:.1f} s, before the timeout of {timeout:g} s had run out"))
    return found


# -- no service ended on its own -------------------------------------------------------------


def ended_on_their_own(exits: Iterable[Exit]) -> list[Violation]:
    """Every Tock service outlives what the soak does to the others and to the backing services (a
    restart of Redis, the broker, PostgreSQL or the kube-apiserver): one that exited without being
    killed is a violation (the soak restarts it and goes on)."""
    return [Violation("ended-on-its-own", f"{exit.kind} {exit.name} exited {exit.code} (found at {exit.at:.3f}); "
                      f"its log ends: {_last_lines(exit.log_tail)}") for exit in exits]


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(empty)"


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


def name_of(key: TryKey) -> str:
    dag_id, run_id, task_id, try_number = key
    return f"{dag_id} / {run_id} / {task_id} try {try_number}"
