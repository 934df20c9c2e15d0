"""The snapshot codec: round trip (dict order included), versioning, fingerprint, cadence."""

from __future__ import annotations

import dataclasses
import json
import zlib

import pytest

from schemas import TaskHeartbeat
from services.scheduler.core import SchedulerState, evolve, fold
from services.scheduler.core import model as model_module
from services.scheduler.core.snapshot import (
    FINGERPRINT,
    MAGIC,
    STATE_VERSION,
    Snapshot,
    SnapshotRefused,
    decode_snapshot,
    encode_snapshot,
    model_classes,
    model_fingerprint,
    snapshot_due,
)
from tests import synthetic_history as synthetic

POSITIONS = {"dags": 3, "events": 1234, "heartbeats": 56}


def busy_state() -> SchedulerState:
    """A state with every part filled: finished and open runs, pauses, backfills, rejections, triggers."""
    state = fold(SchedulerState(), synthetic.history(["etl", "load"], runs_per_dag=5, tasks=3, open_tries=4))
    fold(state, synthetic.heartbeats_of_open("etl", 0, 4, at=2_000.0))
    fold(state, synthetic.oddities("load", at=3_000.0))
    fold(state, list(synthetic.open_run("load", 1, 2, at=3_100.0))[:-2])  # queued, not launched
    return state


def round_trip(state: SchedulerState) -> Snapshot:
    return decode_snapshot(encode_snapshot(Snapshot(7, state, dict(POSITIONS))))


def test_the_busy_state_fills_every_part():
    state = busy_state()
    assert state.finished and state.runs and state.live and state.unlaunched and state.paused
    assert state.backfill_requests and state.rejections and state.triggers and state.requests


def test_round_trip_equals_the_state_dict_order_included():
    state = busy_state()
    restored = round_trip(state)
    assert restored.state == state
    for name in ("runs", "finished", "live", "unlaunched", "waiting", "dags", "triggers"):
        assert list(getattr(restored.state, name)) == list(getattr(state, name)), name
    for key, run in state.runs.items():
        assert list(restored.state.runs[key].tasks) == list(run.tasks)
    assert restored.positions == POSITIONS and restored.partition == 7


def test_a_restored_state_folds_on_like_the_original():
    state = busy_state()
    restored = round_trip(state).state
    beat = TaskHeartbeat(dag_id="etl", run_id="manual__etl-open-0-0", task_id="t0", try_number=1,
                         runner_id="r-manual__etl-open-0-0", at=9_999.0)
    assert evolve(restored, beat) == evolve(state, beat)


def test_an_older_state_version_is_refused_naming_both_versions():
    value = encode_snapshot(Snapshot(3, busy_state(), dict(POSITIONS)))
    older = value.replace(f'"version": {STATE_VERSION}'.encode(), f'"version": {STATE_VERSION - 1}'.encode())
    with pytest.raises(SnapshotRefused, match=f"partition 3 was written by state version {STATE_VERSION - 1}, "
                                              f"this scheduler reads {STATE_VERSION}"):
        decode_snapshot(older)


def test_another_model_fingerprint_is_refused():
    value = encode_snapshot(Snapshot(3, SchedulerState(), dict(POSITIONS)))
    with pytest.raises(SnapshotRefused, match="another scheduler model"):
        decode_snapshot(value.replace(FINGERPRINT.encode(), b"0" * len(FINGERPRINT)))


@pytest.mark.parametrize("value", [b"", b"garbage", MAGIC + b"{not json\n", MAGIC + b'{"format": "x"}\n'])
def test_a_value_that_is_no_snapshot_is_refused(value):
    with pytest.raises(SnapshotRefused):
        decode_snapshot(value)


def test_a_corrupt_body_is_refused():
    value = encode_snapshot(Snapshot(3, busy_state(), dict(POSITIONS)))
    header_end = value.index(b"\n", len(MAGIC)) + 1
    with pytest.raises(SnapshotRefused, match="corrupt"):
        decode_snapshot(value[:header_end] + value[header_end:-20])
    wrong_shape = zlib.compress(json.dumps([[1, 2, 3], []]).encode())
    with pytest.raises(SnapshotRefused, match="corrupt"):
        decode_snapshot(value[:header_end] + wrong_shape)


def test_the_fingerprint_covers_every_model_dataclass_and_the_dag_definitions():
    names = {cls.__name__ for cls in model_classes()}
    assert {"SchedulerState", "DagRun", "TaskInstance", "DagEntry", "Backfill", "Rejection",
            "DagDefinition", "TaskDefinition"} <= names


@pytest.mark.parametrize("change", ["add", "rename", "retype"])
def test_the_fingerprint_changes_when_a_model_field_changes(change):
    classes = model_classes()
    index = [cls.__name__ for cls in classes].index("TaskInstance")
    fields = [(item.name, item.type) for item in dataclasses.fields(classes[index])]
    if change == "add":
        fields.append(("deadline_at", "float | None"))
    elif change == "rename":
        fields[1] = ("status", fields[1][1])
    else:
        fields[2] = (fields[2][0], "float")
    changed = dataclasses.make_dataclass("TaskInstance", fields)
    assert model_fingerprint(classes[:index] + (changed,) + classes[index + 1:]) != model_fingerprint(classes)
    assert model_fingerprint(classes) == FINGERPRINT


def test_the_fingerprint_is_that_of_the_running_model():
    assert model_fingerprint((model_module.SchedulerState,)) != model_fingerprint((model_module.DagRun,))


@pytest.mark.parametrize("folded, seconds, every, interval, due", [
    (0, 0.0, 50_000, 60.0, False),
    (49_999, 10.0, 50_000, 60.0, False),
    (50_000, 10.0, 50_000, 60.0, True),
    (1, 60.0, 50_000, 60.0, True),       # the interval passed with something folded
    (0, 600.0, 50_000, 60.0, False),     # nothing folded: nothing new to save
    (1, 59.9, 50_000, 60.0, False),
    (10**6, 0.0, 0, 60.0, False),        # the count rule off
    (10, 1e6, 50_000, 0.0, False),       # the interval rule off
    (10**6, 1e6, 0, 0.0, False),         # snapshots off
])
def test_snapshot_cadence(folded, seconds, every, interval, due):
    assert snapshot_due(folded, seconds, every, interval) is due


# The fingerprint digests the model's field names and annotation *text*: rewriting an annotation
# (``Optional[int]`` as ``int | None``) changes it as surely as a new field, and every snapshot written
# before is then refused (a full replay on the next takeover: safe, but slow on a long history).
# Pinned so that such a change is made on purpose: bump STATE_VERSION when the meaning changed, and
# update the pin.
# DagDefinition v10: callbacks (v8), priorities and limits (v9), mapped (v10); DagRun reopened_at /
# timed_out_at; task instances have map_index and map_count.
# Task definitions have a sensor (DagParsed v13); task instances a sensor's pokes and wait.
# v5: pools (the ledger and the grants held); task definitions have pool and pool_slots, instances the
# try numbers asked for and granted.
# DagParsed v22: the definitions carry what the UI shows (description, docs, owners): the same encoding.
# DagEntry gains what the walk reads per definition (verdict-sharing keys, inlet URIs, then the segments it
# decides together): derived, rebuilt by DagEntry.of on unpack, so the encoding is the same; snapshots of the
# release before are refused once.
PINNED = (8, "7817f88a09d84b66")


def test_the_model_fingerprint_changes_only_on_purpose():
    from services.scheduler.core.snapshot import FINGERPRINT, STATE_VERSION
    assert (STATE_VERSION, FINGERPRINT) == PINNED, "the snapshot model changed: old snapshots will be refused"
