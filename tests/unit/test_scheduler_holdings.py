"""Which runs the next decide walks (services/scheduler/holdings.py): touched, deferred, or all."""

from __future__ import annotations

from services.scheduler.holdings import Holdings
from services.scheduler.memory import PartitionMemory


def held(*partitions: int) -> Holdings:
    holdings = Holdings()
    holdings.memories.update({partition: PartitionMemory(partition) for partition in partitions})
    return holdings


def test_a_partition_walks_the_runs_its_records_touched_and_those_deferred_while_it_was_unsettled():
    holdings = held(0, 1)
    holdings.defer(0, {("d", "early")})  # touched while our decisions were not read back
    touched = {0: {("d", "r")}, 1: None}
    assert holdings.walk(0, touched) == {("d", "r"), ("d", "early")}
    assert holdings.walk(1, touched) is None
    assert touched[0] == {("d", "r")}  # the records' runs are not changed by the walk
    holdings.walked(0)
    assert holdings.walk(0, {}) == set()
    holdings.defer(1, None)  # an unsettled partition due a full walk keeps it
    holdings.walked(0)
    assert holdings.walk(1, {}) is None


def test_after_a_takeover_or_an_aborted_commit_every_run_is_walked_once():
    holdings = held(0)
    holdings.taken_over({1: PartitionMemory(1)}, started=5.0)
    assert holdings.walk(1, {}) is None and holdings.adoption_due == {1} and holdings.assigned_at == {1: 5.0}
    holdings.walked(1)
    holdings.walk_everything()
    assert holdings.walk(0, {0: {("d", "r")}}) is None and holdings.walk(1, {}) is None
    holdings.walked(0)
    assert holdings.walk(0, {}) == set() and holdings.walk(1, {}) is None


def test_a_forgotten_partition_is_no_longer_held_nor_due_adoption():
    holdings = held()
    holdings.taken_over({2: PartitionMemory(2)}, started=1.0)
    assert holdings.forget(2) is not None and holdings.forget(2) is None
    assert holdings.memories == {} and holdings.adoption_due == set()
