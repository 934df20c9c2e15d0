"""A try's log, read from ``tock.logs`` wherever the try ran (``tock tasks logs`` and the API).

Runners ship each try's output to ``tock.logs`` (services/runner/log_shipping.py), keyed by
the try, in the DAG's partition. A reader starts at the records written a margin before
the try was queued, keeps the try's records, drops a chunk seen before (same offset) and
stops at the try's final record or truncation marker. Following also ends once the
``task_instance`` table says the try has ended and the partition is read to its end.

A try with no record in the topic (it ran before logs were shipped, or its lines are past
the topic's retention) falls back to the file the runner wrote under ``<TOCK_HOME>/tries``
(:class:`infra.try_paths.TryPaths`) when this host has it: the file keeps every line
for as long as the host keeps it, so it is better than nothing and never contradicts the topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Engine

from infra.executors.requests import TryRequest
from infra.log import KeyedPartitionReader, partition_for
from infra.settings import Settings
from infra.try_paths import TryPaths
from projections import queries
from schemas import LOGS, TaskLogShipped, try_log_key
from schemas.tasks import instance_name

CHUNK = 64 * 1024
POLL_SECONDS = 0.5
START_MARGIN_SECONDS = 300.0  # read from this long before the try was queued: clocks of hosts differ
_LIVE_STATES = ("queued", "running")


@dataclass(frozen=True, slots=True)
class TryRef:
    """One try of a task instance (``map_index``: instance N of a mapped task; -1 not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    map_index: int = -1

    def instance(self, engine: Engine) -> queries.Row | None:
        """The try's task instance row as the tables have it now."""
        return queries.task_instance(engine, self.dag_id, self.run_id, self.task_id, self.map_index)

    @property
    def named(self) -> str:
        """The task instance as messages name it: ``task`` or ``task[N]``."""
        return instance_name(self.task_id, self.map_index)


@dataclass(frozen=True, slots=True)
class ShippedLog:
    """What a reader took of a try's shipped records so far."""

    seen: frozenset[int] = frozenset()  # offsets of the chunks taken
    ended: bool = False  # the final record or the truncation marker was taken


def take(state: ShippedLog, records: list[TaskLogShipped]) -> tuple[ShippedLog, list[str]]:
    """The texts to print of ``records`` (in order; a chunk taken before is dropped), and the new state."""
    texts, seen, ended = [], set(state.seen), state.ended
    for record in records:
        if ended or record.offset in seen:  # a redelivered chunk, or past the end
            continue
        seen.add(record.offset)
        if record.text:
            texts.append(record.text)
        ended = record.final or record.truncated
    return ShippedLog(frozenset(seen), ended), texts


class Batch(NamedTuple):
    texts: list[str]  # possibly none
    found: bool  # a record of the try was read (so far)


def shipped_texts(settings: Settings, try_ref: TryRef, since: float,
                  try_ended: Callable[[], bool] | None = None) -> Iterator[Batch]:
    """The try's texts from ``tock.logs``, a batch per poll (possibly empty, so a streaming caller can
    look up between batches). Without ``try_ended``: what is there now. With it (following): until the
    final record, or until ``try_ended()`` and the partition is read to its end."""
    key = try_log_key(try_ref.dag_id, try_ref.run_id, try_ref.task_id, try_ref.try_number, try_ref.map_index)
    partition = partition_for(try_ref.dag_id, settings.partitions)
    with KeyedPartitionReader(settings, LOGS, partition, key, since) as reader:
        state, target, ended = ShippedLog(), reader.end(), try_ended is None
        while not state.ended:
            if reader.next_offset >= target:
                if ended:
                    return
                ended, target = try_ended(), reader.end()
            state, texts = take(state, [record.event for record in reader.poll(POLL_SECONDS)])
            yield Batch(texts, bool(state.seen))


def try_start(engine: Engine, try_ref: TryRef, instance: dict[str, Any] | None) -> float:
    """From when to read the try's records: the first event of the try in the tables, less a margin
    (nothing known: from the topic's beginning)."""
    history = queries.task_history(engine, try_ref.dag_id, try_ref.run_id, try_ref.task_id,
                                   map_index=try_ref.map_index)
    times = [row["at"] for row in history if row["try_number"] == try_ref.try_number
             and row["map_index"] == try_ref.map_index and row["at"] is not None]
    if not times and instance is not None and instance["try_number"] == try_ref.try_number:
        times = [at for at in (instance["queued_at"], instance["start_date"]) if at is not None]
    return max(0.0, min(times) - START_MARGIN_SECONDS) if times else 0.0


def log_file(home: Path, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> Path:
    """Where the runner writes this try's output; refuses names that would leave ``home/tries``."""
    path = TryPaths(home, TryRequest(dag_id, run_id, task_id, try_number, dag_file="", map_index=map_index)).log
    root = (home / "tries").resolve()
    if root not in path.resolve().parents:
        raise ValueError(f"not a log file under {root}: {path}")
    return path


def file_chunks(path: Path) -> Iterator[bytes]:
    """The local file as it is now, in chunks (nothing if it does not exist)."""
    offset = 0
    while chunk := read_from(path, offset):
        offset += len(chunk)
        yield chunk


def try_has_ended(instance: dict[str, Any] | None, try_number: int) -> bool:
    """Whether try ``try_number`` is over as the table shows it: a later try exists, or the
    instance is in any state but queued / running (marked, cleared, killed, failed...)."""
    if instance is None:
        return False  # not even queued yet as far as the table knows
    if instance["try_number"] is None:
        return instance["state"] is not None  # ended without running (upstream failed, removed, marked)
    if instance["try_number"] != try_number:
        return instance["try_number"] > try_number
    return instance["state"] not in _LIVE_STATES


def read_from(path: Path, offset: int) -> bytes:
    """What the file holds from ``offset`` (at most CHUNK bytes); empty if it does not exist yet."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(CHUNK)
    except FileNotFoundError:
        return b""
