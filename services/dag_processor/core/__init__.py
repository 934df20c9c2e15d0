"""Pure core of the DAG processor: its state is the fold of its own events.

The table of running parser children (the wait set), what is known of each file (the
content last parsed, when, how many failures in a row) and the fingerprint of every
known DAG all come from ``evolve``. The shell asks ``decide`` what to do, forks a child
for each ``StartParse``, and turns what a child reports into events with
``decide_exit``; ending a child is an event, so a killed child leaves the wait set the
moment its ProcessorKilled is applied.

When a file is parsed (``due_at``):

- at once when its content is new or changed;
- at once when a module of the DAGs folder that its last clean parse imported has new
  content (the child records each imported module's hash: ``FileRecord.imports``);
- when its bytes and its imports are unchanged: ``reparse_interval`` x
  ``forced_reparse_every`` after its last clean parse (a DAG file may read what the scan
  cannot see: a config file, the environment, the date); every ``reparse_interval`` if
  its imports are not known or one of them is out of the scan's sight (see :func:`reparse_delay`);
- after a failed parse (error, timeout, crash), ``retry_backoff`` later, doubling per
  failure in a row, up to ``reparse_interval``;
- when a helper module changed: see :func:`_helper_changed`.
"""

from __future__ import annotations

import heapq
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Never, NoReturn, TypeAlias, TypeVar

from schemas import (
    DagDefinition,
    DagFileProcessed,
    DagFileRemoved,
    DagParsed,
    DagParseFailed,
    DagRemoved,
    DagsTopicEvent,
    ParsingTopicEvent,
    ProcessorFinished,
    ProcessorKilled,
    ProcessorStarted,
)

TIMEOUT, SHUTDOWN, DIED = "timeout", "shutdown", "died"
K = TypeVar("K")
V = TypeVar("V")

ProcessorEvent: TypeAlias = ParsingTopicEvent | DagsTopicEvent
"""What the processor writes and folds: its own lifecycle and parse outcomes (tock.parsing), the DAGs (tock.dags)."""

Ending: TypeAlias = ProcessorFinished | ProcessorKilled
"""A child's end."""

ParseOutcome: TypeAlias = DagParseFailed | DagFileProcessed | DagParsed | DagRemoved
"""What a parse's result says: its failure, or the file processed and what changed in its DAGs."""


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
class FileRecord:
    """What the processor's events say about one file."""

    file_hash: str | None = None  # the content its last outcome was about; None: no outcome yet
    started_at: float = 0.0  # when its latest parse started
    finished_at: float = 0.0  # when its last outcome was written
    failures: int = 0  # failed parses in a row
    defines_dags: bool | None = None  # whether its last clean parse defined a DAG; None: never parsed cleanly
    imports: Mapping[str, str] | None = None  # DAGs-folder modules its last clean parse imported; None: unknown

    @property
    def is_helper(self) -> bool:
        """Its last parse was clean and defined no DAG: a module that DAG files import."""
        return self.defines_dags is False and self.failures == 0


@dataclass(frozen=True, slots=True)
class ProcessorState:
    """Treat as immutable: ``evolve`` returns a new state."""

    children: Mapping[str, Child] = field(default_factory=dict)  # by processor_id: the wait set
    files: Mapping[str, FileRecord] = field(default_factory=dict)  # by path: every file parsed or being parsed
    dags: Mapping[str, KnownDag] = field(default_factory=dict)  # dag_id -> where and what
    helpers_changed_at: float = float("-inf")  # DAG files whose parse started before this are parsed again

    def files_in_parse(self) -> set[str]:
        return {child.file_path for child in self.children.values()}


@dataclass(frozen=True, slots=True)
class ProcessorConfig:
    """The settings the rules need (from TOCK_PARSE_*, TOCK_DAG_REPARSE_INTERVAL, TOCK_EXECUTORS)."""

    parallelism: int
    timeout: float
    reparse_interval: float
    retry_backoff: float
    executors: tuple[str, ...]
    forced_reparse_every: int = 1  # re-parse intervals between parses of a file whose bytes and imports are unchanged


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
    imports: tuple[tuple[str, str], ...] | None = None  # (path, hash) of each DAGs-folder module imported


# ---------------------------------------------------------------- evolve


def evolve(state: ProcessorState, event: ProcessorEvent) -> ProcessorState:
    """Apply one of the processor's events."""
    match event:
        case ProcessorStarted():
            child = Child(event.processor_id, event.file_path, event.pid, event.file_hash, event.at, event.deadline)
            record = replace(state.files.get(event.file_path, FileRecord()), started_at=event.at)
            return replace(state, children={**state.children, event.processor_id: child},
                           files={**state.files, event.file_path: record})
        case ProcessorFinished() | ProcessorKilled():
            return replace(state, children=_without(state.children, event.processor_id))
        case DagFileProcessed():
            state = _with_outcome(state, event.file_path, event.file_hash, event.at, bool(event.dag_ids))
            return _with_imports(state, event.file_path, event.imports)
        case DagParseFailed():
            return _with_outcome(state, event.file_path, event.file_hash, event.at, None)
        case DagFileRemoved():
            return _without_file(state, event.file_path, event.at)
        case DagParsed():
            known = KnownDag(event.file_path, event.fingerprint)
            return replace(state, dags={**state.dags, event.dag_id: known})
        case DagRemoved():
            return replace(state, dags=_without(state.dags, event.dag_id))
        case _:
            _unknown(event)


def _unknown(event: Never) -> NoReturn:
    """Reached only by a value outside ProcessorEvent (mypy checks every member is handled above)."""
    raise TypeError(f"the DAG processor has no handler for {type(event).__name__}")


def fold(events: Iterable[ProcessorEvent], state: ProcessorState | None = None) -> ProcessorState:
    state = ProcessorState() if state is None else state
    for event in events:
        state = evolve(state, event)
    return state


def _with_outcome(state: ProcessorState, path: str, file_hash: str, at: float,
                  defines_dags: bool | None) -> ProcessorState:
    """A parse's outcome: clean (``defines_dags`` True / False) or failed (None)."""
    before = state.files.get(path, FileRecord())
    failed = defines_dags is None
    after = replace(before, file_hash=file_hash, finished_at=at, failures=before.failures + 1 if failed else 0,
                    defines_dags=before.defines_dags if failed else defines_dags)
    changed_at = state.helpers_changed_at
    if _helper_changed(before, after):
        changed_at = max(changed_at, after.started_at)
    return replace(state, files={**state.files, path: after}, helpers_changed_at=changed_at)


def _with_imports(state: ProcessorState, path: str, imports: Mapping[str, str] | None) -> ProcessorState:
    record = replace(state.files[path], imports=None if imports is None else dict(imports))
    return replace(state, files={**state.files, path: record})


def _helper_changed(before: FileRecord, after: FileRecord) -> bool:
    """New content in a helper module (a file whose latest clean parse defined no DAG):
    the DAG files of the folder are parsed again.

    A DAG file may import any module of the DAGs folder (the folder and the file's own
    directory are on its import path), so the simplest correct rule is the whole folder:
    every file but the known helpers is parsed again if its last parse started before
    the helper's new content was parsed. Nothing is triggered by a file seen for the
    first time (or every start-up would parse the folder twice), nor by a file that
    never parsed cleanly (editing a broken DAG file would parse the folder on every
    save); a DAG file failing for want of such a module is retried with the failure
    backoff, and every file is parsed again within the re-parse interval anyway.
    """
    return before.file_hash is not None and before.file_hash != after.file_hash and after.defines_dags is False


def _without_file(state: ProcessorState, path: str, at: float) -> ProcessorState:
    # Removing a helper module changes what DAG files importing it see, as editing it does.
    removed = state.files.get(path)
    changed_at = state.helpers_changed_at
    if removed is not None and removed.defines_dags is False:
        changed_at = max(changed_at, at)
    return replace(state, files=_without(state.files, path), helpers_changed_at=changed_at)


def recovered_state(latest: Iterable[tuple[str, DagParsed | None]]) -> ProcessorState:
    """The known DAGs from the compacted ``tock.dags`` records (a tombstone is None), and
    their files as DAG files with no outcome yet (parsed at once; removed if gone)."""
    dags: dict[str, KnownDag] = {}
    for dag_id, parsed in latest:
        if parsed is None:
            dags.pop(dag_id, None)
        else:
            dags[dag_id] = KnownDag(parsed.file_path, parsed.fingerprint)
    files = {known.file_path: FileRecord(defines_dags=True) for known in dags.values()}
    return ProcessorState(files=files, dags=dags)


def _without(mapping: Mapping[K, V], key: K) -> dict[K, V]:
    return {name: value for name, value in mapping.items() if name != key}


# ---------------------------------------------------------------- decide


Decision: TypeAlias = ProcessorKilled | DagParseFailed | DagRemoved | DagFileRemoved | StartParse
"""What ``decide`` returns: events to write (timeouts, removals), and parses to start."""


def decide(state: ProcessorState, now: float, files: Mapping[str, str], config: ProcessorConfig) -> list[Decision]:
    """Given the latest scan (path -> content hash): kill overdue children, drop vanished
    files and DAGs, and start the parses that are due while slots are free."""
    expired = overdue(state, now)
    decisions: list[Decision] = [event for child in expired for event in timed_out(child, now)]
    decisions += decide_removals(state, now, files)
    free = config.parallelism - (len(state.children) - len(expired))
    decisions += decide_starts(state, now, files, free, config)
    return decisions


def overdue(state: ProcessorState, now: float) -> list[Child]:
    """Children past their deadline."""
    return [child for child in state.children.values() if child.deadline <= now]


def timed_out(child: Child, now: float) -> list[ProcessorKilled | DagParseFailed]:
    allowed = child.deadline - child.started_at
    return [
        ProcessorKilled(file_path=child.file_path, processor_id=child.processor_id, pid=child.pid,
                        reason=TIMEOUT, at=now),
        DagParseFailed(file_path=child.file_path, processor_id=child.processor_id, file_hash=child.file_hash,
                       error=f"parsing took longer than {allowed:g} s (TOCK_PARSE_TIMEOUT) and was killed",
                       at=now),
    ]


def decide_removals(state: ProcessorState, now: float,
                    files: Mapping[str, str]) -> list[DagRemoved | DagFileRemoved]:
    """Files gone from the folder, and their DAGs; a file still being parsed waits for its outcome."""
    busy = state.files_in_parse()
    # Sorted after filtering: this runs every turn, and almost always finds nothing gone.
    gone_dags = [DagRemoved(dag_id=dag_id, file_path=known.file_path, at=now)
                 for dag_id, known in sorted((dag_id, known) for dag_id, known in state.dags.items()
                                             if known.file_path not in files and known.file_path not in busy)]
    gone_files = [DagFileRemoved(file_path=path, at=now)
                  for path in sorted(path for path in state.files if path not in files and path not in busy)]
    return [*gone_dags, *gone_files]


def decide_starts(state: ProcessorState, now: float, files: Mapping[str, str], free: int,
                  config: ProcessorConfig) -> list[StartParse]:
    """The ``free`` files most due: new or changed content first (by path), then by due time."""
    if free <= 0:
        return []
    busy = state.files_in_parse()
    due = [(when, path) for path, file_hash in files.items()
           if path not in busy and (when := due_at(state, state.files.get(path), file_hash, config, files)) <= now]
    return [StartParse(path, files[path]) for _, path in heapq.nsmallest(free, due)]


def due_at(state: ProcessorState, record: FileRecord | None, file_hash: str, config: ProcessorConfig,
           files: Mapping[str, str]) -> float:
    """When a file should next be parsed (-inf: at once; its content is new), given the
    latest scan (``files``: path -> content hash)."""
    if record is None or record.file_hash != file_hash:
        return float("-inf")
    delay = retry_delay(record.failures, config) if record.failures else reparse_delay(record, files, config)
    when = record.finished_at + delay
    if record.started_at < state.helpers_changed_at and not record.is_helper:
        return min(when, state.helpers_changed_at)
    return when


def reparse_delay(record: FileRecord, files: Mapping[str, str], config: ProcessorConfig) -> float:
    """Seconds from a clean parse to the next of the same bytes.

    0 if a module it imported has other content in the scan now. If every module it
    imported has the content it was compiled from, nothing the scan sees changed: only
    every ``forced_reparse_every`` intervals (for what it cannot see). If its imports are
    unknown (not recorded), or one is missing from the scan (deleted, or where the scan
    does not look, e.g. a symlinked directory), every interval, as before skipping existed.
    """
    if record.imports is None:
        return config.reparse_interval
    unseen = False
    for path, compiled in record.imports.items():  # a loop, not a comprehension: this runs per file per turn
        now = files.get(path)
        if now is None:
            unseen = True
        elif now != compiled:
            return 0.0
    return config.reparse_interval * (1 if unseen else config.forced_reparse_every)


def retry_delay(failures: int, config: ProcessorConfig) -> float:
    """Seconds from the ``failures``-th failure in a row to the next attempt."""
    return min(config.retry_backoff * 2.0 ** min(failures - 1, 32), config.reparse_interval)


def processor_started(start: StartParse, processor_id: str, pid: int, now: float,
                      config: ProcessorConfig) -> ProcessorStarted:
    return ProcessorStarted(file_path=start.file_path, processor_id=processor_id, pid=pid,
                            deadline=now + config.timeout, at=now, file_hash=start.file_hash)


def decide_exit(state: ProcessorState, processor_id: str, exit_code: int, result: ParseResult | None,
                now: float, config: ProcessorConfig) -> list[Ending | ParseOutcome]:
    """A child exited and was reaped. Nothing to say if it had already ended (e.g. was killed)."""
    child = state.children.get(processor_id)
    if child is None:
        return []
    ended: Ending
    if exit_code == 0 and result is not None:
        ended = ProcessorFinished(file_path=child.file_path, processor_id=processor_id, pid=child.pid,
                                  exit_code=exit_code, duration=now - child.started_at, at=now)
    else:
        ended = ProcessorKilled(file_path=child.file_path, processor_id=processor_id, pid=child.pid,
                                reason=DIED, exit_code=exit_code, at=now)
    if result is None:
        result = ParseResult(child.file_hash, error=describe_death(exit_code))
    return [ended, *decide_outcome(state, child, result, now, config.executors)]


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


def decide_outcome(state: ProcessorState, child: Child, result: ParseResult, now: float,
                   executors: tuple[str, ...]) -> list[ParseOutcome]:
    """The parse outcome: DagParseFailed, or DagFileProcessed plus what changed in its DAGs."""
    file_hash = result.file_hash or child.file_hash
    error = result.error or _conflict(state, child.file_path, result) or _unknown_executor(result, executors)
    if error is not None:
        return [DagParseFailed(file_path=child.file_path, processor_id=child.processor_id, file_hash=file_hash,
                               error=error, traceback=result.traceback if result.error else "", at=now)]
    dag_ids = [definition.dag_id for definition, _ in result.dags]
    imports = None if result.imports is None else dict(result.imports)
    processed = DagFileProcessed(file_path=child.file_path, processor_id=child.processor_id, file_hash=file_hash,
                                 dag_ids=sorted(dag_ids), duration=now - child.started_at, at=now, imports=imports)
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
        if known is not None and known.file_path != file_path and known.file_path in state.files:
            return f"DAG {definition.dag_id!r} is already defined in {known.file_path}"
    return None


def _unknown_executor(result: ParseResult, executors: tuple[str, ...]) -> str | None:
    # The authoring API knows every executor Tock has; this installation may run fewer.
    for definition, _ in result.dags:
        for task in definition.tasks:
            if task.executor not in executors:
                return (f"task {task.task_id!r} of DAG {definition.dag_id!r} names executor {task.executor!r}, "
                        f"which this installation does not run (available: {', '.join(executors)}; "
                        "TOCK_EXECUTORS)")
    return None
