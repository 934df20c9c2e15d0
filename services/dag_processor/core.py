"""Pure core of the DAG processor: its state is the fold of its own events.

The table of running parser children (the wait set), the content hash last parsed
per file and the fingerprint of every known DAG all come from ``evolve``. The shell
asks ``decide`` what to do, forks a child for each ``StartParse``, and turns what a
child reports into events with ``decide_exit``; ending a child is an event, so a
killed child leaves the wait set the moment its ProcessorKilled is applied.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from schemas import (
    DagDefinition,
    DagFileProcessed,
    DagFileRemoved,
    DagParsed,
    DagParseFailed,
    DagRemoved,
    ProcessorFinished,
    ProcessorKilled,
    ProcessorStarted,
)

TIMEOUT, SHUTDOWN, DIED = "timeout", "shutdown", "died"


@dataclass(frozen=True, slots=True)
class Child:
    """A parser child that was started and has not ended."""

    processor_id: str
    file_path: str
    pid: int
    file_hash: str
    started_at: float
    deadline: float


@dataclass(frozen=True, slots=True)
class KnownDag:
    file_path: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class ProcessorState:
    """Treat as immutable: ``evolve`` returns a new state."""

    children: Mapping[str, Child] = field(default_factory=dict)  # by processor_id: the wait set
    attempted: Mapping[str, str] = field(default_factory=dict)  # file path -> hash last parsed
    dags: Mapping[str, KnownDag] = field(default_factory=dict)  # dag_id -> where and what

    def files_in_parse(self) -> set[str]:
        return {child.file_path for child in self.children.values()}


@dataclass(frozen=True, slots=True)
class Limits:
    parallelism: int
    timeout: float


@dataclass(frozen=True, slots=True)
class StartParse:
    """Decision: fork a child to parse this file (the shell emits ProcessorStarted with its pid)."""

    file_path: str
    file_hash: str


@dataclass(frozen=True, slots=True)
class ParseResult:
    """What a child reports: the DAGs with their fingerprints, or the error."""

    file_hash: str
    dags: tuple[tuple[DagDefinition, str], ...] = ()
    error: str | None = None
    traceback: str = ""


# ---------------------------------------------------------------- evolve


def evolve(state: ProcessorState, event: object) -> ProcessorState:
    """Apply one of the processor's events."""
    match event:
        case ProcessorStarted():
            child = Child(event.processor_id, event.file_path, event.pid, event.file_hash, event.at, event.deadline)
            return replace(state, children={**state.children, event.processor_id: child})
        case ProcessorFinished() | ProcessorKilled():
            return replace(state, children=_without(state.children, event.processor_id))
        case DagFileProcessed() | DagParseFailed():
            return replace(state, attempted={**state.attempted, event.file_path: event.file_hash})
        case DagFileRemoved():
            return replace(state, attempted=_without(state.attempted, event.file_path))
        case DagParsed():
            known = KnownDag(event.file_path, event.fingerprint)
            return replace(state, dags={**state.dags, event.dag_id: known})
        case DagRemoved():
            return replace(state, dags=_without(state.dags, event.dag_id))
    raise TypeError(f"the DAG processor has no handler for {type(event).__name__}")


def fold(events: Iterable[object], state: ProcessorState | None = None) -> ProcessorState:
    state = ProcessorState() if state is None else state
    for event in events:
        state = evolve(state, event)
    return state


def recovered_state(latest: Iterable[tuple[str, DagParsed | None]]) -> ProcessorState:
    """The known DAGs from the compacted ``tock.dags`` records (a tombstone is None)."""
    dags: dict[str, KnownDag] = {}
    for dag_id, parsed in latest:
        if parsed is None:
            dags.pop(dag_id, None)
        else:
            dags[dag_id] = KnownDag(parsed.file_path, parsed.fingerprint)
    return ProcessorState(dags=dags)


def _without(mapping: Mapping, key) -> dict:
    return {name: value for name, value in mapping.items() if name != key}


# ---------------------------------------------------------------- decide


def decide(state: ProcessorState, now: float, files: Mapping[str, str], limits: Limits) -> list:
    """Given the latest scan (path -> content hash): kill overdue children, drop vanished
    files and DAGs, and start parses of new or changed files while slots are free."""
    expired = overdue(state, now)
    decisions: list = [event for child in expired for event in timed_out(child, now)]
    decisions += decide_removals(state, now, files)
    free = limits.parallelism - (len(state.children) - len(expired))
    return decisions + decide_starts(state, files, free)


def overdue(state: ProcessorState, now: float) -> list[Child]:
    """Children past their deadline."""
    return [child for child in state.children.values() if child.deadline <= now]


def timed_out(child: Child, now: float) -> list:
    allowed = child.deadline - child.started_at
    return [
        ProcessorKilled(file_path=child.file_path, processor_id=child.processor_id, pid=child.pid,
                        reason=TIMEOUT, at=now),
        DagParseFailed(file_path=child.file_path, processor_id=child.processor_id, file_hash=child.file_hash,
                       error=f"parsing took longer than {allowed:g} s (TOCK_PARSE_TIMEOUT) and was killed",
                       at=now),
    ]


def decide_removals(state: ProcessorState, now: float, files: Mapping[str, str]) -> list:
    """Files gone from the folder, and their DAGs; a file still being parsed waits for its outcome."""
    busy = state.files_in_parse()
    gone_dags = [DagRemoved(dag_id=dag_id, file_path=known.file_path, at=now)
                 for dag_id, known in sorted(state.dags.items())
                 if known.file_path not in files and known.file_path not in busy]
    gone_files = [DagFileRemoved(file_path=path, at=now)
                  for path in sorted(state.attempted) if path not in files and path not in busy]
    return gone_dags + gone_files


def decide_starts(state: ProcessorState, files: Mapping[str, str], free: int) -> list[StartParse]:
    if free <= 0:
        return []
    busy = state.files_in_parse()
    changed = (path for path in sorted(files) if state.attempted.get(path) != files[path] and path not in busy)
    starts = []
    for path in changed:
        if len(starts) == free:
            break
        starts.append(StartParse(path, files[path]))
    return starts


def processor_started(start: StartParse, processor_id: str, pid: int, now: float, limits: Limits) -> ProcessorStarted:
    return ProcessorStarted(file_path=start.file_path, processor_id=processor_id, pid=pid,
                            deadline=now + limits.timeout, at=now, file_hash=start.file_hash)


def decide_exit(state: ProcessorState, processor_id: str, exit_code: int, result: ParseResult | None,
                now: float) -> list:
    """A child exited and was reaped. Nothing to say if it had already ended (e.g. was killed)."""
    child = state.children.get(processor_id)
    if child is None:
        return []
    if exit_code == 0 and result is not None:
        ended = ProcessorFinished(file_path=child.file_path, processor_id=processor_id, pid=child.pid,
                                  exit_code=exit_code, duration=now - child.started_at, at=now)
    else:
        ended = ProcessorKilled(file_path=child.file_path, processor_id=processor_id, pid=child.pid,
                                reason=DIED, exit_code=exit_code, at=now)
    if result is None:
        result = ParseResult(child.file_hash, error=describe_death(exit_code))
    return [ended, *decide_outcome(state, child, result, now)]


def decide_shutdown(state: ProcessorState, now: float) -> list[ProcessorKilled]:
    return [ProcessorKilled(file_path=child.file_path, processor_id=child.processor_id, pid=child.pid,
                            reason=SHUTDOWN, at=now)
            for child in state.children.values()]


def describe_death(exit_code: int) -> str:
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"the parser process was killed by {name} before reporting a result"
    return f"the parser process exited with code {exit_code} before reporting a result"


def decide_outcome(state: ProcessorState, child: Child, result: ParseResult, now: float) -> list:
    """The parse outcome: DagParseFailed, or DagFileProcessed plus what changed in its DAGs."""
    file_hash = result.file_hash or child.file_hash
    error = result.error or _conflict(state, child.file_path, result)
    if error is not None:
        return [DagParseFailed(file_path=child.file_path, processor_id=child.processor_id, file_hash=file_hash,
                               error=error, traceback=result.traceback if result.error else "", at=now)]
    dag_ids = [definition.dag_id for definition, _ in result.dags]
    processed = DagFileProcessed(file_path=child.file_path, processor_id=child.processor_id, file_hash=file_hash,
                                 dag_ids=sorted(dag_ids), duration=now - child.started_at, at=now)
    changed = [DagParsed(dag_id=definition.dag_id, file_path=child.file_path, fingerprint=print_,
                         definition=definition, at=now)
               for definition, print_ in result.dags
               if state.dags.get(definition.dag_id) != KnownDag(child.file_path, print_)]
    dropped = [DagRemoved(dag_id=dag_id, file_path=child.file_path, at=now)
               for dag_id, known in sorted(state.dags.items())
               if known.file_path == child.file_path and dag_id not in dag_ids]
    return [processed, *changed, *dropped]


def _conflict(state: ProcessorState, file_path: str, result: ParseResult) -> str | None:
    # A dag_id belongs to one file; another file that still exists keeps it.
    for definition, _ in result.dags:
        known = state.dags.get(definition.dag_id)
        if known is not None and known.file_path != file_path and known.file_path in state.attempted:
            return f"DAG {definition.dag_id!r} is already defined in {known.file_path}"
    return None
