"""A monitor partition's snapshot (services/monitor/core/snapshot.py): decoding what was encoded gives
the same state; restoring a snapshot and folding the tail equals folding the whole log, also when
the snapshot already holds our own decisions not read back yet; other code's snapshots are refused."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import CallbackCalled, DagRunReopened, TaskDeadlineMissed
from services.monitor.core import decide, due_notifications, fold
from services.monitor.core.snapshot import (
    MAGIC,
    MonitorSnapshot,
    SnapshotRefused,
    decode_snapshot,
    encode_snapshot,
    snapshot_due,
)
from tests.unit.test_monitor_core import (
    HOOK,
    RUN,
    T0,
    adopted,
    created,
    finished,
    missed,
    try_events,
    with_callbacks,
)

POSITIONS = {"dags": 3, "events": 41}


def round_trip(state, positions=POSITIONS):
    return decode_snapshot(encode_snapshot(MonitorSnapshot(2, state, dict(positions))))


def history():
    return [with_callbacks(on_deadline_missed=HOOK, on_failure=HOOK), created(), *try_events("a", T0, T0 + 1, T0 + 3),
            *try_events("b", T0 + 1, T0 + 2, T0 + 9, failed=True)[:3], missed(T0 + 5), adopted(T0 + 6),
            created(T0 + 7, run_id="other"), finished(T0 + 8, "failed", run_id="other"),
            TaskDeadlineMissed(dag_id="etl", run_id=RUN, task_id="b", deadline=T0 + 4, at=T0 + 6)]


def test_decoding_what_was_encoded_gives_the_same_state_and_positions():
    state = fold(history())
    assert state.runs and state.started and state.stats.cells and due_notifications(state.notifications)
    restored = round_trip(state)
    assert (restored.partition, restored.positions) == (2, POSITIONS)
    assert restored.state == state


STEPS = ["create", "finish", "miss", "reopen", "adopt", "try", "callback"]


@given(st.lists(st.sampled_from(STEPS), max_size=25), st.integers(min_value=0, max_value=25),
       st.integers(min_value=0, max_value=25))
def test_restoring_then_folding_the_tail_equals_folding_it_all(steps, cut, unread):
    """The live monitor folded ``head`` and committed its decisions (folded only once read back); they
    land in the log after ``unread`` records it had not read yet. A snapshot taken then, restored and
    followed by the log's tail, gives what the live monitor and a full replay give. (Folding decisions
    at commit, as the monitor once did, counted its own misses twice in its statistics.)"""
    builders = {"create": lambda at: [created(at)], "finish": lambda at: [finished(at)],
                "miss": lambda at: [missed(at)], "adopt": lambda at: [adopted(at)],
                "reopen": lambda at: [DagRunReopened(dag_id="etl", run_id=RUN, at=at)],
                "try": lambda at: try_events("a", at, at + 0.5, at + 0.7),
                "callback": lambda at: [CallbackCalled(dag_id="etl", run_id=RUN, trigger="deadline_missed",
                                                       target=HOOK, attempts=1, ok=True, at=at)]}
    events = [with_callbacks(on_deadline_missed=HOOK)]
    for index, step in enumerate(steps):
        events += builders[step](T0 + 10 * index)
    head, rest = events[:cut + 1], events[cut + 1:]
    live = fold(head)
    decisions = decide(live, T0 + 1000)
    snapshot = round_trip(live).state  # written with the decisions: the state before them
    log_tail = rest[:unread] + decisions + rest[unread:]
    restored = fold(log_tail, snapshot)
    fold(log_tail, live)
    replayed = fold(head + log_tail)
    assert restored == live == replayed


def test_a_snapshot_of_other_code_or_a_corrupt_one_is_refused():
    value = encode_snapshot(MonitorSnapshot(0, fold(history()), dict(POSITIONS)))
    header, _, body = value[len(MAGIC):].partition(b"\n")
    other = json.loads(header) | {"fingerprint": "0" * 16}
    with pytest.raises(SnapshotRefused, match="this code reads"):
        decode_snapshot(MAGIC + json.dumps(other).encode() + b"\n" + body)
    with pytest.raises(SnapshotRefused, match="corrupt"):
        decode_snapshot(MAGIC + header + b"\n" + zlib.compress(b"[1, 2]"))
    with pytest.raises(SnapshotRefused, match="not a monitor snapshot"):
        decode_snapshot(b"TOCKSNAP\n{}\n")  # a scheduler's


@pytest.mark.parametrize("folded, seconds, expected", [
    (10, 1.0, True),    # every 10 records
    (3, 60.0, True),    # or every 60 s with a record folded
    (0, 600.0, False),  # nothing new: no snapshot
    (3, 1.0, False),
])
def test_a_snapshot_is_due_after_so_many_records_or_seconds(folded, seconds, expected):
    assert snapshot_due(folded, seconds, 10, 60.0) is expected


def test_a_miss_of_ours_is_folded_once_when_read_back_and_the_partition_waits_for_it():
    from infra.log import LogRecord
    from services.monitor.folds import PartitionFold

    head = [with_callbacks(on_deadline_missed=HOOK), created(T0)]
    live = PartitionFold(0)
    for offset, event in enumerate(head):
        live.fold_record("events", LogRecord("tock.events", 0, offset, "etl", event, 0.0))
    decisions = decide(live.state, T0 + 1000)
    assert decisions, "the history owes a deadline miss"
    live.awaiting.committed(decisions, now=T0 + 1000)
    assert not live.awaiting.settled(T0 + 1000)  # nothing more is decided for it until they come back
    for offset, event in enumerate(decisions, start=len(head)):
        live.fold_record("events", LogRecord("tock.events", 0, offset, "etl", event, 0.0))
    assert live.awaiting.settled(T0 + 1000) and live.state == fold(head + decisions)
