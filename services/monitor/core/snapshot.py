"""A monitor partition's fold as bytes, and back: the value of its record in tock.snapshots.

Never pickle: anyone able to write the topic would run code in every monitor. The format is
explicit, positional and versioned::

    b"TOCKMON\\n" | header (JSON, one line) | b"\\n" | zlib(JSON of the state, positional lists)

The header names the format, ``STATE_VERSION``, a fingerprint of the state's dataclasses
(``FINGERPRINT``), the partition and the next offsets the state covers. A snapshot written by
other code is refused (``SnapshotRefused``) and the caller replays the full history instead.

Why a snapshot may be taken at any moment, also with decisions of ours committed but not read
back yet: folding DeadlineMissed, TaskDeadlineMissed and CallbackCalled again changes nothing
(each is marked once), and the live monitor folds them at commit, before the records that
precede them in the log, exactly as a restore followed by a replay of the tail does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from dataclasses import dataclass
from typing import Any, TypeAlias

from services.monitor.core.notify import (
    Callback,
    DagCallbacks,
    Notification,
    NotificationBook,
    RunContext,
    TryContext,
)
from services.monitor.core.state import MonitorState, RunClock, TaskClock
from services.monitor.core.windows import Aggregate, WindowedStats, WindowSpec

FORMAT = "tock-monitor-state"
STATE_VERSION = 2  # bump when the meaning of the encoding changes with the same fields
MAGIC = b"TOCKMON\n"
COMPRESSION_LEVEL = 1

Json: TypeAlias = Any  # a value parsed from (or written as) JSON: its shape is the positional format here
MODEL = (MonitorState, RunClock, TaskClock, WindowedStats, WindowSpec, Aggregate, NotificationBook, Notification,
         DagCallbacks, Callback, RunContext, TryContext)


class SnapshotRefused(ValueError):
    """A snapshot this code must not read (other format, version or model, or corrupt)."""


@dataclass(frozen=True, slots=True)
class MonitorSnapshot:
    """What a snapshot restores: one partition's state and the next offsets (per logical topic) it covers."""

    partition: int
    state: MonitorState
    positions: dict[str, int]


def model_fingerprint(classes: tuple[type, ...] = MODEL) -> str:
    """A digest of the names and declared types of every field of ``classes``."""
    shape = [(cls.__name__, [(item.name, str(item.type)) for item in dataclasses.fields(cls)]) for cls in classes]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


FINGERPRINT = model_fingerprint()


def snapshot_due(folded_since: int, seconds_since: float, every_events: int, interval_seconds: float) -> bool:
    """Whether a partition is due a snapshot: ``every_events`` records folded since its last one, or
    ``interval_seconds`` passed with at least one record folded (0 turns either rule off)."""
    if every_events > 0 and folded_since >= every_events:
        return True
    return interval_seconds > 0 and folded_since > 0 and seconds_since >= interval_seconds


# -- encoding ----------------------------------------------------------------------------------

def encode_snapshot(snapshot: MonitorSnapshot) -> bytes:
    """The record value of a snapshot."""
    header = {"format": FORMAT, "version": STATE_VERSION, "fingerprint": FINGERPRINT,
              "partition": snapshot.partition, "positions": snapshot.positions}
    body = json.dumps(_pack_state(snapshot.state), separators=(",", ":")).encode()
    return MAGIC + json.dumps(header).encode() + b"\n" + zlib.compress(body, COMPRESSION_LEVEL)


def _pack_state(state: MonitorState) -> list[Json]:
    return [list(state.deadlines.items()), sorted(state.after_logical_date),
            [[*key, clock.started_at, clock.missed, clock.logical_date] for key, clock in state.runs.items()],
            sorted(map(list, state.missed)), [[*key, deadline] for key, deadline in state.finished_late.items()],
            [[dag_id, list(tasks.items())] for dag_id, tasks in state.task_deadlines.items()],
            [[*key, clock.queued_at, clock.ended, clock.missed] for key, clock in state.tasks.items()],
            sorted(map(list, state.tasks_missed)),
            [[*key, *queued] for key, queued in state.queued.items()],
            [[*key, at] for key, at in state.started.items()],
            _pack_stats(state.stats), _pack_notifications(state.notifications), state.events_folded]


def _pack_stats(stats: WindowedStats) -> list[Json]:
    return [[[spec.name, spec.size, spec.step] for spec in stats.specs], stats.retention, stats.newest,
            stats._pruned_at,  # noqa: SLF001 - the same core's own bookkeeping, kept across a restore
            [[measure, list(key), name, start, aggregate.count, aggregate.total, aggregate.low, aggregate.high]
             for (measure, key, name, start), aggregate in stats.cells.items()]]


def _pack_notifications(book: NotificationBook) -> list[Json]:
    return [[_pack_dag_callbacks(dag_id, callbacks) for dag_id, callbacks in book.dags.items()],
            [[item.dag_id, item.run_id, item.trigger, item.target, item.payload, item.task_id, item.try_number,
              item.context] for item in book.owed.values()],
            sorted(map(list, book.settled)),
            [[*key, run.logical_date, run.run_type, run.conf_json] for key, run in book.runs.items()],
            [[*key, *dataclasses.astuple(context)] for key, context in book.tries.items()]]


def _pack_dag_callbacks(dag_id: str, callbacks: DagCallbacks) -> list[Json]:
    run = {trigger: [[item.target, item.context] for item in items] for trigger, items in callbacks.run.items()}
    return [dag_id, callbacks.since, run, callbacks.tasks, callbacks.retries, callbacks.params_json]


# -- decoding ----------------------------------------------------------------------------------

def decode_snapshot(value: bytes) -> MonitorSnapshot:
    """A snapshot's record value back; SnapshotRefused if this code must not read it."""
    if not value.startswith(MAGIC):
        raise SnapshotRefused("not a monitor snapshot")
    header_line, _, body = value[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(header_line)
    except ValueError as error:
        raise SnapshotRefused(f"unreadable snapshot header ({error})") from None
    found = (header.get("format"), header.get("version"), header.get("fingerprint"))
    if found != (FORMAT, STATE_VERSION, FINGERPRINT):
        raise SnapshotRefused(f"a snapshot of {found}, this code reads {(FORMAT, STATE_VERSION, FINGERPRINT)}")
    try:
        state = _unpack_state(json.loads(zlib.decompress(body)))
        return MonitorSnapshot(int(header["partition"]), state, {str(name): int(offset)
                                                                 for name, offset in header["positions"].items()})
    except (ValueError, TypeError, KeyError, IndexError, zlib.error) as error:
        raise SnapshotRefused(f"corrupt monitor snapshot ({type(error).__name__}: {error})") from None


def _unpack_state(packed: list[Json]) -> MonitorState:
    (deadlines, after, runs, missed, late, task_deadlines, tasks, tasks_missed, queued, started, stats,
     notifications, folded) = packed
    return MonitorState(
        deadlines=dict(deadlines), after_logical_date=set(after),
        runs={(dag_id, run_id): RunClock(at, missed_, logical) for dag_id, run_id, at, missed_, logical in runs},
        missed={(dag_id, run_id) for dag_id, run_id in missed},
        finished_late={(dag_id, run_id): deadline for dag_id, run_id, deadline in late},
        task_deadlines={dag_id: dict(items) for dag_id, items in task_deadlines},
        tasks={(dag_id, run_id, task_id): TaskClock(at, ended, missed_)
               for dag_id, run_id, task_id, at, ended, missed_ in tasks},
        tasks_missed={(dag_id, run_id, task_id) for dag_id, run_id, task_id in tasks_missed},
        queued={(dag_id, run_id, task_id, int(number)): (at, executor, queue)
                for dag_id, run_id, task_id, number, at, executor, queue in queued},
        started={(dag_id, run_id, task_id, int(number)): at for dag_id, run_id, task_id, number, at in started},
        stats=_unpack_stats(stats), notifications=_unpack_notifications(notifications), events_folded=int(folded))


def _unpack_stats(packed: list[Json]) -> WindowedStats:
    specs, retention, newest, pruned_at, cells = packed
    stats = WindowedStats(specs=tuple(WindowSpec(name, size, step) for name, size, step in specs), retention=retention,
                          cells={(measure, tuple(key), name, start): Aggregate(count, total, low, high)
                                 for measure, key, name, start, count, total, low, high in cells},
                          newest=newest)
    stats._pruned_at = pruned_at  # noqa: SLF001 - see _pack_stats
    return stats


def _unpack_notifications(packed: list[Json]) -> NotificationBook:
    dags, owed, settled, runs, tries = packed
    notifications = [Notification(dag_id, run_id, trigger, target, payload, task_id, int(number), bool(context))
                     for dag_id, run_id, trigger, target, payload, task_id, number, context in owed]
    return NotificationBook(
        dags={dag_id: DagCallbacks(since, {trigger: [Callback(target, bool(context)) for target, context in items]
                                           for trigger, items in run.items()}, tasks, retries, params_json)
              for dag_id, since, run, tasks, retries, params_json in dags},
        owed={item.key: item for item in notifications},
        settled={(dag_id, run_id, trigger, task_id, int(number), target)
                 for dag_id, run_id, trigger, task_id, number, target in settled},
        runs={(dag_id, run_id): RunContext(logical, run_type, conf)
              for dag_id, run_id, logical, run_type, conf in runs},
        tries={(dag_id, run_id, task_id): TryContext(*fields) for dag_id, run_id, task_id, *fields in tries})
