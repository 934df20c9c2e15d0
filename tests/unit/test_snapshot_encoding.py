"""Snapshots encoded in a forked child while the scheduler decides on (services/scheduler/snapshot_encoding.py):
the bytes are those the memory had at the fork, whatever it folds meanwhile; a child that dies costs that
snapshot only; Snapshots hands a finished one to the next commit and counts again from its start."""

from __future__ import annotations

import time

from infra.settings import load_settings
from schemas import EVENTS
from services.scheduler.holdings import Holdings
from services.scheduler.memory import PartitionMemory, snapshot_of
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.snapshot_encoding import SnapshotEncoder
from services.scheduler.snapshots import Snapshots
from tests.unit.scheduler_fixtures import created, log_record, parsed, queued


def memory_with(*events) -> PartitionMemory:
    memory = PartitionMemory(3)
    for offset, event in enumerate(events):
        memory.fold_record(EVENTS, log_record(event, offset))
    return memory


def collected(encoder: SnapshotEncoder, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while encoder.encoding():
        found = encoder.collect()
        if found:
            return found
        assert time.monotonic() < deadline, "the child did not finish encoding"
        time.sleep(0.01)
    return []


def test_the_child_encodes_the_memory_as_it_was_at_the_fork():
    memory = memory_with(parsed("etl", {"a": [], "b": ["a"]}), created("etl"))
    at_fork = snapshot_of(memory)
    encoder = SnapshotEncoder()
    encoder.start(3, memory)
    memory.fold_record(EVENTS, log_record(queued("a"), 2))  # folded while the child encodes
    [encoded] = collected(encoder)
    assert (encoded.partition, encoded.memory_id, encoded.value) == (3, id(memory), at_fork)
    assert snapshot_of(memory) != at_fork and encoder.encoding() == frozenset()


def test_a_child_that_fails_costs_that_snapshot_only():
    encoder = SnapshotEncoder()
    encoder.start(4, object())  # type: ignore[arg-type]  # not a memory: its encoding raises in the child
    deadline = time.monotonic() + 30
    while encoder.encoding():
        assert encoder.collect() == []
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_snapshot_due_is_encoded_beside_the_decisions_then_handed_to_the_next_commit():
    memory = memory_with(parsed("etl", {"a": []}), created("etl"))
    memory.snapshot_at = 0.0  # long ago: due by its interval
    snapshots = Snapshots(load_settings({}), Holdings(memories={3: memory}), SchedulerMetrics(), on=True)
    snapshots.begin(time.time())
    assert memory.folded_since_snapshot == 0 and snapshots.due(time.time()) == []  # counted from its start
    deadline = time.monotonic() + 30
    while not (ready := snapshots.finished()):
        assert time.monotonic() < deadline, "the snapshot was not encoded"
        time.sleep(0.01)
    assert ready == [3]
    written = snapshots.records(ready)  # the parts an earlier owner may have left are deleted first
    assert written[-1].value == snapshot_of(memory)
    snapshots.written(written)
    assert snapshots.finished() == []


def test_a_snapshot_of_a_memory_replaced_meanwhile_is_dropped():
    holdings = Holdings(memories={3: memory_with(parsed("etl", {"a": []}))})
    holdings.memories[3].snapshot_at = 0.0
    snapshots = Snapshots(load_settings({}), holdings, SchedulerMetrics(), on=True)
    snapshots.begin(time.time())
    holdings.memories[3] = PartitionMemory(3)  # the partition was lost and taken over again
    deadline = time.monotonic() + 30
    while snapshots._encoder.encoding():
        assert snapshots.finished() == []
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert snapshots.finished() == []
    snapshots.close()
