"""Who runs a try: the first of its TaskStarted and TaskKillRequested in log order decides.

Every runner launched for a try appends its TaskStarted, then reads the try's partition
of tock.events; the partition orders every record of the try the same way for every
reader, on every host, so exactly one runner sees its TaskStarted first and runs the user
code. A TaskKillRequested before any TaskStarted (the owner stopped a try no runner had
claimed yet) means no runner runs it: the scheduler folds the same rule and holds the try
over already. A TaskDeclaredDead before any TaskStarted (a launch that never started, e.g. a
Celery message redelivered long after the try was given up and retried) means the same: the
try is over and its retry is the one that runs. A TaskKillRequested after a TaskStarted is
for the winner to obey, and so is a TaskDeclaredDead after it: dead means stopped (the owner gave
the try up and retries it, so a runner that was only cut off, frozen or slow must not run it on
beside its retry).

A reader looks the start of its read up by time (where the try was queued), and a clock can be off:
every claim record of a try comes after its TaskQueued in the log, so a claim record read before
the try's TaskQueued shows the read began too late (:func:`unanchored`), and it is read again from
further back. Pure: the reading is the shell's (services/runner/claim_reader.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from schemas import TaskDeclaredDead, TaskKillRequested, TaskQueued, TaskStarted

TryKey = tuple[str, str, str, int]  # (dag_id, run_id, instance, try_number): TryRequest.key
# What decides a claim (and kill requests stop a won try).
TryRecord = TaskStarted | TaskKillRequested | TaskDeclaredDead
# What a claim reads: those, and the TaskQueued that shows the read began early enough (it decides nothing).
ClaimRead = TryRecord | TaskQueued


@dataclass(frozen=True, slots=True)
class Claims:
    """How the claims of a runner's tries stand."""

    won: frozenset[TryKey] = frozenset()
    lost: Mapping[TryKey, str] = field(default_factory=dict)  # try -> the winner's runner id
    killed: Mapping[TryKey, str] = field(default_factory=dict)  # lost to a kill request: try -> its reason
    pending: frozenset[TryKey] = frozenset()  # nothing of the try read yet (not even our TaskStarted)
    queued: Mapping[TryKey, TaskQueued] = field(default_factory=dict)  # each try's TaskQueued: its context

    @property
    def decided(self) -> bool:
        return not self.pending


def try_key(event: ClaimRead) -> TryKey:
    """The try an event is of; an instance of a mapped task is ``task|N``, as TryRequest.key names it."""
    instance = event.task_id if event.map_index < 0 else f"{event.task_id}|{event.map_index}"
    return (event.dag_id, event.run_id, instance, event.try_number)


def first_records(records_in_log_order: Iterable[ClaimRead], keys: Iterable[TryKey]) -> dict[TryKey, TryRecord]:
    """The first TaskStarted, TaskKillRequested or TaskDeclaredDead of each of these tries that the log holds."""
    wanted, first = set(keys), {}
    for record in records_in_log_order:
        if isinstance(record, TaskQueued):
            continue
        key = try_key(record)
        if key in wanted and key not in first:
            first[key] = record
    return first


def unanchored(records_in_log_order: Iterable[ClaimRead], keys: Collection[TryKey]) -> frozenset[TryKey]:
    """Of these tries, those whose first record read is a claim record, not their TaskQueued.

    Runners are launched once a try's TaskQueued is committed, and kill requests and deaths are of a
    queued try, so the log holds a try's claim records after its TaskQueued: a read that meets one
    first began past the TaskQueued, and the first claim record may lie before where it began."""
    seen: dict[TryKey, bool] = {}  # try -> whether its TaskQueued came first
    for record in records_in_log_order:
        key = try_key(record)
        if key in keys and key not in seen:
            seen[key] = isinstance(record, TaskQueued)
    return frozenset(key for key, queued_first in seen.items() if not queued_first)


def winners(records_in_log_order: Iterable[ClaimRead], own: Mapping[TryKey, str]) -> Claims:
    """Decide each of our tries (try -> our runner id) from the records read so far, in log order.

    A try is won when its first record is our TaskStarted; lost when it is another runner's
    (even before ours is read: nothing can come before the first) or a kill request; pending
    when nothing of it is read yet.
    """
    first = first_records(records_in_log_order, own)
    started = {key: record.runner_id for key, record in first.items() if isinstance(record, TaskStarted)}
    return Claims(won=frozenset(key for key, runner_id in started.items() if runner_id == own[key]),
                  lost={key: runner_id for key, runner_id in started.items() if runner_id != own[key]},
                  killed={key: _why_over(record) for key, record in first.items()
                          if not isinstance(record, TaskStarted)},
                  pending=frozenset(own.keys() - first.keys()))


def _why_over(record: TaskKillRequested | TaskDeclaredDead) -> str:
    if isinstance(record, TaskDeclaredDead):
        return f"declared dead before any runner started it ({record.reason})"
    return record.reason


def kill_requests(records_in_log_order: Iterable[ClaimRead], tries: Collection[TryKey]) -> dict[TryKey, str]:
    """Why each of these tries must stop: the first of its TaskKillRequested and TaskDeclaredDead
    among the records (read after the claim: the winner obeys both alike)."""
    found: dict[TryKey, str] = {}
    for record in records_in_log_order:
        if isinstance(record, TaskKillRequested | TaskDeclaredDead) and (key := try_key(record)) in tries:
            found.setdefault(key, _why_stop(record))
    return found


def _why_stop(record: TaskKillRequested | TaskDeclaredDead) -> str:
    if isinstance(record, TaskDeclaredDead):
        return f"declared dead by the scheduler ({record.reason})"
    return record.reason
