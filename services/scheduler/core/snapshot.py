"""A partition's folded state as bytes, and back: the body of a record in tock.snapshots.

Never pickle: anyone able to write the topic would run code in every scheduler. The format is
explicit, positional and versioned::

    b"TOCKSNAP\\n" | header (JSON, one line) | b"\\n" | zlib(JSON body)

The header names the format, ``STATE_VERSION`` and a fingerprint of the model's fields
(``model_fingerprint``): a snapshot written by other code is refused (``SnapshotRefused``)
before its body is read, and the caller replays the full history instead. Events (echoes,
pending triggers and backfill requests) are Avro records (schemas.codec), so they keep
decoding across schema versions; everything else is positional lists, in dict order
(deciding walks ``runs``, ``live``, ``unlaunched``, ``waiting`` in that order).

Derived data (a DAG's task map and topological order, any index added later) is not
written: ``restored`` rebuilds it after decoding.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from schemas import DagDefinition, TaskDefinition, decode, encode
from services.scheduler.core import model
from services.scheduler.core.model import (Backfill, DagEntry, DagRun, Rejection, SchedulerState, TaskInstance,
                                           topological_order)

FORMAT = "tock-scheduler-state"
STATE_VERSION = 1  # bump when the meaning of the encoding changes with the same fields
MAGIC = b"TOCKSNAP\n"
COMPRESSION_LEVEL = 1  # fast: the encoding runs on the decision thread


class SnapshotRefused(ValueError):
    """A snapshot this code must not read (other version or model, or corrupt); ``reason`` says why."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a snapshot restores: the state, the next offsets it covers, and our unread decisions."""

    partition: int
    state: SchedulerState
    positions: dict[str, int]
    echoes: deque


def model_classes() -> tuple[type, ...]:
    """Every dataclass whose fields the snapshot depends on."""
    ours = [cls for cls in vars(model).values()
            if dataclasses.is_dataclass(cls) and isinstance(cls, type) and cls.__module__ == model.__name__]
    return tuple(sorted(ours, key=lambda cls: cls.__name__)) + (DagDefinition, TaskDefinition)


def model_fingerprint(classes: tuple[type, ...] | None = None) -> str:
    """A digest of the names and declared types of every field of ``classes`` (default: the model)."""
    shape = [(cls.__name__, [(item.name, str(item.type)) for item in dataclasses.fields(cls)])
             for cls in (model_classes() if classes is None else classes)]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


FINGERPRINT = model_fingerprint()


# -- encoding ----------------------------------------------------------------------------------

def encode_snapshot(snapshot: Snapshot) -> bytes:
    """The record value of a snapshot."""
    header = {"format": FORMAT, "version": STATE_VERSION, "fingerprint": FINGERPRINT,
              "partition": snapshot.partition, "positions": snapshot.positions}
    body = [_pack_state(snapshot.state), [_pack_event(event) for event in snapshot.echoes]]
    packed = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), COMPRESSION_LEVEL)
    return MAGIC + json.dumps(header).encode() + b"\n" + packed


def _pack_state(state: SchedulerState) -> list:
    return [[_pack_dag(entry) for entry in state.dags.values()],
            sorted(state.paused),
            [_pack_run(run) for run in state.runs.values()],
            list(state.latest_scheduled.items()),
            list(state.next_due.items()),
            [_pack_event(trigger) for trigger in state.triggers.values()],
            [_pack_run(run) for run in state.finished.values()],
            sorted(state.requests),
            [[request, *dataclasses.astuple(rejection)] for request, rejection in state.rejections.items()],
            [_pack_dag(entry) for entry in state.removed_dags.values()],
            [_pack_event(request) for request in state.backfill_requests.values()],
            [_pack_backfill(key, backfill) for key, backfill in state.backfills.items()],
            list(state.unlaunched), list(state.live), list(state.waiting)]


def _pack_dag(entry: DagEntry) -> list:
    definition = entry.definition
    fields = [getattr(definition, name) for name in _DAG_FIELDS]
    fields[_DAG_TASKS] = [[getattr(task, name) for name in _TASK_FIELDS] for task in definition.tasks]
    return [fields, entry.fingerprint, entry.first_seen_at]


def _pack_run(run: DagRun) -> list:
    # The tasks dict is keyed by each instance's task_id, the runs dicts by (dag_id, run_id): both derived.
    return [run.dag_id, run.run_id, run.logical_date, run.run_type, run.conf_json, run.created_at,
            [[getattr(instance, name) for name in _INSTANCE_FIELDS] for instance in run.tasks.values()],
            run.finished_state, run.reopened_by]


def _pack_backfill(key: str, backfill: Backfill) -> list:
    return [key, backfill.dag_id, backfill.dates, backfill.reprocess_failed, backfill.conf_json,
            sorted(backfill.runs), backfill.cancelled]


def _pack_event(event: Any) -> str:
    return base64.b64encode(encode(event)).decode("ascii")


_DAG_FIELDS = tuple(item.name for item in dataclasses.fields(DagDefinition))
_DAG_TASKS = _DAG_FIELDS.index("tasks")
_TASK_FIELDS = tuple(item.name for item in dataclasses.fields(TaskDefinition))
_INSTANCE_FIELDS = tuple(item.name for item in dataclasses.fields(TaskInstance))


# -- decoding ----------------------------------------------------------------------------------

def read_header(value: bytes) -> tuple[dict, int]:
    """The header of a snapshot record and where its body starts. Raises SnapshotRefused."""
    if not value or not value.startswith(MAGIC):
        raise SnapshotRefused("not a scheduler snapshot (bad or missing header)")
    end = value.find(b"\n", len(MAGIC))
    try:
        header = json.loads(value[len(MAGIC):end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SnapshotRefused("not a scheduler snapshot (unreadable header)")
    return header, end + 1


def decode_snapshot(value: bytes) -> Snapshot:
    """The snapshot in a record value. Raises SnapshotRefused when it was written by another state
    version or model, or is corrupt: the caller then replays the full history."""
    header, body_start = read_header(value)
    partition = header.get("partition")
    if header.get("version") != STATE_VERSION:
        raise SnapshotRefused(f"snapshot of partition {partition} was written by state version "
                              f"{header.get('version')}, this scheduler reads {STATE_VERSION}")
    if header.get("fingerprint") != FINGERPRINT:
        raise SnapshotRefused(f"snapshot of partition {partition} was written for another scheduler model "
                              f"(fingerprint {header.get('fingerprint')}, this scheduler's is {FINGERPRINT})")
    try:
        state_body, echoes = json.loads(zlib.decompress(value[body_start:]))
        state = restored(_unpack_state(state_body))
        positions = {str(topic): int(offset) for topic, offset in header["positions"].items()}
        return Snapshot(int(partition), state, positions, deque(_unpack_event(text) for text in echoes))
    except Exception as error:  # noqa: BLE001 - any malformed body is refused, never half-read
        raise SnapshotRefused(f"snapshot of partition {partition} is corrupt: {type(error).__name__}: {error}") \
            from None


def restored(state: SchedulerState) -> SchedulerState:
    """Rebuild what the state derives from its fields after decoding (nothing yet: the hook for
    indexes such as a deadline heap, which are not written in snapshots)."""
    return state


def _unpack_state(body: list) -> SchedulerState:
    (dags, paused, runs, latest, next_due, triggers, finished, requests, rejections, removed,
     backfill_requests, backfills, unlaunched, live, waiting) = body
    state = SchedulerState()
    state.dags = {entry.definition.dag_id: entry for entry in map(_unpack_dag, dags)}
    state.paused = set(paused)
    state.runs = {(run.dag_id, run.run_id): run for run in map(_unpack_run, runs)}
    state.latest_scheduled = dict(latest)
    state.next_due = dict(next_due)
    state.triggers = {(trigger.dag_id, model.manual_run_id(trigger.request_id)): trigger
                      for trigger in map(_unpack_event, triggers)}
    state.finished = {(run.dag_id, run.run_id): run for run in map(_unpack_run, finished)}
    state.requests = set(requests)
    state.rejections = {request: Rejection(*fields) for request, *fields in rejections}
    state.removed_dags = {entry.definition.dag_id: entry for entry in map(_unpack_dag, removed)}
    state.backfill_requests = {request.request_id: request for request in map(_unpack_event, backfill_requests)}
    state.backfills = dict(map(_unpack_backfill, backfills))
    state.unlaunched, state.live, state.waiting = (dict.fromkeys(map(tuple, keys)) for keys in
                                                   (unlaunched, live, waiting))
    return state


def _unpack_dag(packed: list) -> DagEntry:
    fields, fingerprint, first_seen_at = packed
    fields = dict(zip(_DAG_FIELDS, fields, strict=True))
    fields["tasks"] = [TaskDefinition(**dict(zip(_TASK_FIELDS, task, strict=True))) for task in fields["tasks"]]
    definition = DagDefinition(**fields)
    tasks = {task.task_id: task for task in definition.tasks}
    return DagEntry(definition, fingerprint, first_seen_at, tasks, topological_order(tasks))


def _unpack_run(packed: list) -> DagRun:
    dag_id, run_id, logical_date, run_type, conf_json, created_at, instances, finished_state, reopened_by = packed
    tasks = {fields[0]: TaskInstance(*fields) for fields in instances}
    return DagRun(dag_id, run_id, logical_date, run_type, conf_json, created_at, tasks, finished_state, reopened_by)


def _unpack_backfill(packed: list) -> tuple[str, Backfill]:
    key, dag_id, dates, reprocess_failed, conf_json, runs, cancelled = packed
    return key, Backfill(dag_id, dates, reprocess_failed, conf_json, set(map(tuple, runs)), cancelled)


def _unpack_event(text: str) -> Any:
    return decode(base64.b64decode(text))


# -- cadence -----------------------------------------------------------------------------------

def snapshot_due(folded_since: int, seconds_since: float, every_events: int, interval_seconds: float) -> bool:
    """Whether a partition is due a snapshot: ``every_events`` records folded since its last one, or
    ``interval_seconds`` passed with at least one record folded (0 turns either rule off)."""
    if every_events > 0 and folded_since >= every_events:
        return True
    return interval_seconds > 0 and folded_since > 0 and seconds_since >= interval_seconds
