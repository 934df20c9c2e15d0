"""A partition's folded state as bytes, and back: the body of a record in tock.snapshots.

Never pickle: anyone able to write the topic would run code in every scheduler. The format is
explicit, positional and versioned::

    b"TOCKSNAP\\n" | header (JSON, one line) | b"\\n" | zlib(body)

    body = framed blobs: JSON of everything but the runs | run columns | task counts | instance columns

The header names the format, ``STATE_VERSION`` and a fingerprint of the model's fields
(``model_fingerprint``): a snapshot written by other code is refused (``SnapshotRefused``)
before its body is read, and the caller replays the full history instead. Events (pending
triggers and backfill requests) are Avro records (schemas.codec), so they keep
decoding across schema versions; runs and task instances (most of a long history: the finished
runs) are columns (core/columns.py), fast to write and read; the rest is positional JSON lists.
Everything keeps dict order (deciding walks ``runs``, ``live``, ``unlaunched``, ``waiting`` in order).

Derived data (a DAG's task map and topological order, any index added later) is not
written: ``restored`` rebuilds it after decoding.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from schemas import (
    AssetDefinition,
    AssetEventQueued,
    AssetEventRecorded,
    ClearTask,
    DagDefinition,
    Event,
    ExternalWaitDefinition,
    ExternalWaitRequested,
    InletEventDelivered,
    MapDefinition,
    MapInput,
    MarkerDefinition,
    RequestBackfill,
    SensorDefinition,
    TaskDefinition,
    TaskGroupDefinition,
    TimeWaitDefinition,
    TriggerDagRun,
    WatcherDefinition,
    decode,
    encode,
)
from schemas.runs import manual_run_id
from services.scheduler.core import columns, model
from services.scheduler.core.forgotten import DateSet, ForgottenRuns, RequestIds
from services.scheduler.core.liveness import reindex_timers
from services.scheduler.core.model import (
    INSTANCE_FIELDS,
    RUN_FIELDS,
    Ask,
    AssetLedger,
    AssetSides,
    Backfill,
    DagEntry,
    DagRun,
    FinishedRuns,
    PackedRun,
    PoolLedger,
    Quarantine,
    Rejection,
    SchedulerState,
    TaskInstance,
)

FORMAT = "tock-scheduler-state"
STATE_VERSION = 8  # bump when the meaning of the encoding changes with the same fields
# v2: quarantined DAGs and the quarantines announced in tock.events (two more lists after ``waiting``).
# v3: no echoes (our decisions are folded when read back, in log order).
# v4: retention: request ids oldest first (not sorted), forgotten runs per DAG, a backfill's forgotten_failed.
# v5: pools: the ledger of the pools on the partition, and the grants its tries hold (one more list at the end).
# v6: assets: the ledger of the assets on the partition, its successes' events to record, its DAGs'
#     registrations and queues (one more list at the end).
# v7: external task sensors' waits on the partition's DAGs and those not read yet, and the clears markers ask
#     of other DAGs (three more lists at the end).
# v8: assets: each asset's readers and latest events, and its DAGs' reading and the events they read (four more
#     lists at the end of the assets' list); task definitions have their inlets.
MAGIC = b"TOCKSNAP\n"
COMPRESSION_LEVEL = 1  # fast: the encoding runs on the decision thread

Json: TypeAlias = Any  # a value parsed from (or written as) JSON: its shape is the positional format above
E = TypeVar("E", TriggerDagRun, RequestBackfill, AssetEventRecorded, AssetEventQueued, ExternalWaitRequested,
            ClearTask, InletEventDelivered)


class SnapshotRefused(ValueError):
    """A snapshot this code must not read (other version or model, or corrupt); ``reason`` says why."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a snapshot restores: the state folded from the log up to the next offsets it covers."""

    partition: int
    state: SchedulerState
    positions: dict[str, int]


def model_classes() -> tuple[type, ...]:
    """Every dataclass whose fields the snapshot depends on."""
    ours = [cls for cls in vars(model).values()
            if dataclasses.is_dataclass(cls) and isinstance(cls, type) and cls.__module__ == model.__name__]
    return tuple(sorted(ours, key=lambda cls: cls.__name__)) + (DagDefinition, TaskDefinition, TaskGroupDefinition)


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
    state = snapshot.state
    runs = [*map(PackedRun.of, state.runs.values()), *state.finished.packed()]
    instances = [row for run in runs for row in run.instances]
    rest = [_pack_state(state), [len(state.runs), len(state.finished), len(instances)]]
    body = columns.frame([json.dumps(rest, separators=(",", ":")).encode(),
                          *columns.pack_tuples([run.run for run in runs], _RUN_KINDS),
                          array("q", [len(run.instances) for run in runs]).tobytes(),
                          *columns.pack_tuples(instances, _INSTANCE_KINDS)])
    return MAGIC + json.dumps(header).encode() + b"\n" + zlib.compress(body, COMPRESSION_LEVEL)


def _pack_state(state: SchedulerState) -> list[Json]:
    """Everything but the runs (written as columns)."""
    return [[_pack_dag(entry) for entry in state.dags.values()],
            sorted(state.paused),
            list(state.latest_scheduled.items()),
            list(state.next_due.items()),
            [_pack_event(trigger) for trigger in state.triggers.values()],
            list(state.requests),
            [[request, *dataclasses.astuple(rejection)] for request, rejection in state.rejections.items()],
            [_pack_dag(entry) for entry in state.removed_dags.values()],
            [_pack_event(request) for request in state.backfill_requests.values()],
            [_pack_backfill(key, backfill) for key, backfill in state.backfills.items()],
            list(state.unlaunched), list(state.live), list(state.waiting),
            [[dag_id, *dataclasses.astuple(held)] for dag_id, held in state.quarantined.items()],
            [[dag_id, *dataclasses.astuple(said)] for dag_id, said in state.announced.items()],
            [_pack_forgotten(dag_id, forgotten) for dag_id, forgotten in state.forgotten.items()],
            _pack_pools(state), _pack_assets(state.assets),
            [_pack_event(wait) for wait in state.external_waits.values()], list(state.fresh_waits),
            [[request_id, dag_id, [_pack_event(clear) for clear in clears]]
             for request_id, (dag_id, clears) in state.external_clears.items()]]


def _pack_dag(entry: DagEntry) -> list[Json]:
    definition = entry.definition
    fields = [getattr(definition, name) for name in _DAG_FIELDS]
    fields[_DAG_TASKS] = [[_packed_task_field(task, name) for name in _TASK_FIELDS] for task in definition.tasks]
    fields[_DAG_GROUPS] = [dataclasses.astuple(group) for group in definition.task_groups]
    fields[_DAG_ASSETS] = [dataclasses.astuple(asset) for asset in definition.schedule_assets]
    return [fields, entry.fingerprint, entry.first_seen_at]


_NESTED_TASK_FIELDS = ("mapped", "sensor", "external", "time_wait", "marker")  # records inside a task definition


def _packed_task_field(task: TaskDefinition, name: str) -> Json:
    value = getattr(task, name)
    if name in ("outlets", "inlets"):
        return [dataclasses.astuple(asset) for asset in value]
    return dataclasses.asdict(value) if name in _NESTED_TASK_FIELDS and value is not None else value


def _unpacked_task(packed: list[Json]) -> TaskDefinition:
    fields = dict(zip(_TASK_FIELDS, packed, strict=True))
    mapped = fields["mapped"]
    if mapped is not None:
        fields["mapped"] = MapDefinition(**{**mapped, "inputs": [MapInput(**item) for item in mapped["inputs"]]})
    if fields["sensor"] is not None:
        fields["sensor"] = SensorDefinition(**fields["sensor"])
    if fields["external"] is not None:
        fields["external"] = ExternalWaitDefinition(**fields["external"])
    if fields["time_wait"] is not None:
        fields["time_wait"] = TimeWaitDefinition(**fields["time_wait"])
    if fields["marker"] is not None:
        fields["marker"] = MarkerDefinition(**fields["marker"])
    fields["outlets"] = [_unpacked_asset(asset) for asset in fields["outlets"]]
    fields["inlets"] = [_unpacked_asset(asset) for asset in fields["inlets"]]
    return TaskDefinition(**fields)


def _pack_backfill(key: str, backfill: Backfill) -> list[Json]:
    return [key, backfill.dag_id, backfill.dates, backfill.reprocess_failed, backfill.conf_json,
            sorted(backfill.runs), backfill.cancelled, backfill.forgotten_failed]


def _pack_forgotten(dag_id: str, forgotten: ForgottenRuns) -> list[Json]:
    return [dag_id, forgotten.scheduled.packed(), forgotten.backfill.packed(),
            base64.b64encode(forgotten.others.tobytes()).decode("ascii"), forgotten.count]


def _pack_event(event: Event) -> str:
    return base64.b64encode(encode(event)).decode("ascii")


_DAG_FIELDS = tuple(item.name for item in dataclasses.fields(DagDefinition))
_DAG_TASKS, _DAG_GROUPS = _DAG_FIELDS.index("tasks"), _DAG_FIELDS.index("task_groups")
_DAG_ASSETS = _DAG_FIELDS.index("schedule_assets")
_ASSET_FIELDS = tuple(item.name for item in dataclasses.fields(AssetDefinition))
_TASK_FIELDS = tuple(item.name for item in dataclasses.fields(TaskDefinition))
_GROUP_FIELDS = tuple(item.name for item in dataclasses.fields(TaskGroupDefinition))
# The runs dicts are keyed by (dag_id, run_id), a run's tasks by each instance's task_id: both derived.
_RUN_KINDS = columns.field_kinds(DagRun, RUN_FIELDS)
_INSTANCE_KINDS = columns.field_kinds(TaskInstance, INSTANCE_FIELDS)


# -- decoding ----------------------------------------------------------------------------------

def read_header(value: bytes) -> tuple[dict[str, Json], int]:
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
        snapshot = _decode_body(zlib.decompress(value[body_start:]), header)
    except Exception as error:  # noqa: BLE001 - any malformed body is refused, never half-read
        raise SnapshotRefused(f"snapshot of partition {partition} is corrupt: {type(error).__name__}: {error}") \
            from None
    return snapshot


def _decode_body(body: bytes, header: dict[str, Json]) -> Snapshot:
    blobs = columns.unframe(body)
    rest, (live_runs, finished_runs, instance_count) = json.loads(blobs[0])
    run_blobs = blobs[1:1 + len(_RUN_KINDS)]
    task_counts = array("q", blobs[1 + len(_RUN_KINDS)]).tolist()
    instance_blobs = blobs[2 + len(_RUN_KINDS):]
    instances = list(zip(*columns.unpack_columns(instance_blobs, _INSTANCE_KINDS, instance_count), strict=False))
    runs = _unpack_runs(columns.unpack_columns(run_blobs, _RUN_KINDS, live_runs + finished_runs),
                        task_counts, instances)
    state = _unpack_state(rest)
    state.runs = {packed.key: packed.build() for packed in runs[:live_runs]}
    state.finished = FinishedRuns(runs[live_runs:])
    positions = {str(topic): int(offset) for topic, offset in header["positions"].items()}
    return Snapshot(int(header["partition"]), restored(state), positions)


def _unpack_runs(run_columns: list[Sequence[columns.Value]], task_counts: list[int],
                 instances: list[tuple[columns.Value, ...]]) -> list[PackedRun]:
    if sum(task_counts) != len(instances) or len(task_counts) != len(run_columns[0]):
        raise ValueError("run and task instance counts disagree")
    runs, start = [], 0
    for fields, count in zip(zip(*run_columns, strict=False), task_counts, strict=False):
        runs.append(PackedRun(fields, tuple(instances[start:start + count])))
        start += count
    return runs


def restored(state: SchedulerState) -> SchedulerState:
    """Rebuild what the state derives from its fields after decoding: the deadline heaps."""
    reindex_timers(state)
    return state


def _unpack_state(body: list[Json]) -> SchedulerState:
    (dags, paused, latest, next_due, triggers, requests, rejections, removed,
     backfill_requests, backfills, unlaunched, live, waiting, quarantined, announced, forgotten, pools,
     assets, external_waits, fresh_waits, external_clears) = body
    state = SchedulerState()
    state.dags = {entry.definition.dag_id: entry for entry in map(_unpack_dag, dags)}
    state.paused = set(paused)
    state.latest_scheduled = dict(latest)
    state.next_due = dict(next_due)
    state.triggers = {(trigger.dag_id, manual_run_id(trigger.request_id)): trigger
                      for trigger in (_unpack_as(TriggerDagRun, text) for text in triggers)}
    state.requests = RequestIds(requests)
    state.rejections = {request: Rejection(*fields) for request, *fields in rejections}
    state.removed_dags = {entry.definition.dag_id: entry for entry in map(_unpack_dag, removed)}
    state.backfill_requests = {request.request_id: request
                               for request in (_unpack_as(RequestBackfill, text) for text in backfill_requests)}
    state.backfills = dict(map(_unpack_backfill, backfills))
    state.unlaunched, state.live, state.waiting = (dict.fromkeys(map(tuple, keys)) for keys in
                                                   (unlaunched, live, waiting))
    state.quarantined = {dag_id: Quarantine(*fields) for dag_id, *fields in quarantined}
    state.announced = {dag_id: Quarantine(*fields) for dag_id, *fields in announced}
    state.forgotten = dict(map(_unpack_forgotten, forgotten))
    _unpack_pools(state, pools)
    state.assets = _unpack_assets(assets)
    state.external_waits = {wait.wait_id: wait
                            for wait in (_unpack_as(ExternalWaitRequested, text) for text in external_waits)}
    state.fresh_waits = dict.fromkeys(fresh_waits)
    state.external_clears = {request_id: (dag_id, [_unpack_as(ClearTask, text) for text in clears])
                             for request_id, dag_id, clears in external_clears}
    return state


def _pack_pools(state: SchedulerState) -> list[Json]:
    ledger = state.pools
    return [[[pool, slots, description] for pool, (slots, description) in ledger.sizes.items()],
            [[*key, *dataclasses.astuple(ask)] for key, ask in ledger.asks.items()],
            [[*key, slots] for key, slots in ledger.grants.items()], ledger.asked,
            [[*key, slots] for key, slots in state.pool_holdings.items()]]


def _unpack_pools(state: SchedulerState, packed: list[Json]) -> None:
    sizes, asks, grants, asked, holdings = packed
    state.pools = PoolLedger({pool: (slots, description) for pool, slots, description in sizes},
                             {tuple(row[:6]): Ask(*row[6:]) for row in asks},
                             {tuple(row[:6]): row[6] for row in grants}, asked)
    state.pool_holdings = {tuple(row[:6]): row[6] for row in holdings}


def _unpacked_asset(packed: list[Json]) -> AssetDefinition:
    fields = dict(zip(_ASSET_FIELDS, packed, strict=True))
    fields["watchers"] = [WatcherDefinition(name=name, topics=list(topics), apply_function=function)
                          for name, topics, function in fields["watchers"]]
    return AssetDefinition(**fields)


def _unpack_dag(packed: list[Json]) -> DagEntry:
    fields, fingerprint, first_seen_at = packed
    fields = dict(zip(_DAG_FIELDS, fields, strict=True))
    fields["tasks"] = [_unpacked_task(task) for task in fields["tasks"]]
    fields["task_groups"] = [TaskGroupDefinition(**dict(zip(_GROUP_FIELDS, group, strict=True)))
                            for group in fields["task_groups"]]
    fields["schedule_assets"] = [_unpacked_asset(asset) for asset in fields["schedule_assets"]]
    return DagEntry.of(DagDefinition(**fields), fingerprint, first_seen_at)


def _unpack_backfill(packed: list[Json]) -> tuple[str, Backfill]:
    key, dag_id, dates, reprocess_failed, conf_json, runs, cancelled, forgotten_failed = packed
    return key, Backfill(dag_id, dates, reprocess_failed, conf_json, set(map(tuple, runs)), cancelled,
                         forgotten_failed)


def _unpack_forgotten(packed: list[Json]) -> tuple[str, ForgottenRuns]:
    dag_id, scheduled, backfill, others, count = packed
    digests = array("Q")
    digests.frombytes(base64.b64decode(others))
    return dag_id, ForgottenRuns(DateSet(*scheduled), DateSet(*backfill), digests, count)


def _unpack_event(text: str) -> Event:
    event: Event = decode(base64.b64decode(text))
    return event


def _unpack_as(kind: type[E], text: str) -> E:
    """A pending trigger or backfill request (a snapshot holding anything else there is corrupt)."""
    event = _unpack_event(text)
    if not isinstance(event, kind):
        raise ValueError(f"expected a {kind.__name__}, found a {type(event).__name__}")
    return event


def _pack_assets(sides: AssetSides) -> list[Json]:
    ledger = sides.ledger
    return [[[uri, list(dag_ids)] for uri, dag_ids in ledger.consumers.items()],
            [_pack_event(event) for event in ledger.pending.values()], list(ledger.handed),
            [[*key, [_pack_event(event) for event in events]] for key, events in sides.outbox.items()],
            [[dag_id, list(uris)] for dag_id, uris in sides.registered.items()],
            [[dag_id, [_pack_event(event) for event in queue.values()]] for dag_id, queue in sides.queues.items()],
            [[uri, list(readers.items())] for uri, readers in ledger.readers.items()],
            [[uri, [_pack_event(event) for event in events]] for uri, events in ledger.recent.items()],
            [[dag_id, list(uris)] for dag_id, uris in sides.reading.items()],
            [[dag_id, [[uri, [_pack_event(event) for event in events.values()]] for uri, events in by_uri.items()]]
             for dag_id, by_uri in sides.inlet_events.items()]]


def _unpack_assets(packed: list[Json]) -> AssetSides:
    consumers, pending, handed, outbox, registered, queues, readers, recent, reading, inlet_events = packed
    recorded = (_unpack_as(AssetEventRecorded, text) for text in pending)
    ledger = AssetLedger({uri: dict.fromkeys(dag_ids) for uri, dag_ids in consumers},
                         {event.event_id: event for event in recorded}, dict.fromkeys(handed),
                         {uri: dict(map(tuple, caught_up)) for uri, caught_up in readers},
                         {uri: [_unpack_as(AssetEventRecorded, text) for text in events] for uri, events in recent})
    return AssetSides(ledger, {tuple(row[:5]): [_unpack_as(AssetEventRecorded, text) for text in row[5]]
                               for row in outbox},
                      {dag_id: tuple(uris) for dag_id, uris in registered},
                      {dag_id: {event.event_id: event for event in map(_queued_event, queue)}
                       for dag_id, queue in queues},
                      {dag_id: tuple(uris) for dag_id, uris in reading},
                      {dag_id: {uri: {event.event_id: event for event in map(_delivered_event, events)}
                                for uri, events in by_uri} for dag_id, by_uri in inlet_events})


def _queued_event(text: str) -> AssetEventQueued:
    return _unpack_as(AssetEventQueued, text)


def _delivered_event(text: str) -> InletEventDelivered:
    return _unpack_as(InletEventDelivered, text)


# -- cadence -----------------------------------------------------------------------------------

def snapshot_due(folded_since: int, seconds_since: float, every_events: int, interval_seconds: float) -> bool:
    """Whether a partition is due a snapshot: ``every_events`` records folded since its last one, or
    ``interval_seconds`` passed with at least one record folded (0 turns either rule off)."""
    if every_events > 0 and folded_since >= every_events:
        return True
    return interval_seconds > 0 and folded_since > 0 and seconds_since >= interval_seconds
