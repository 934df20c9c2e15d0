"""The codec: every event round-trips, frozen schemas match declarations, old versions decode."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas
from schemas.avro import avro_schema, frozen_schema, frozen_versions
from schemas.codec import MAGIC
from schemas.freeze import SAMPLES_DIR, drifted
from schemas.union import EVENT_CLASSES

ALL_EVENTS = sorted(schemas.EVENT_TYPES.values(), key=lambda cls: cls.__name__)

# The minimum set of events DESIGN.md names; all must be declared.
DESIGN_EVENTS = """DagParsed DagParseFailed ProcessorStarted ProcessorFinished ProcessorKilled DagRunCreated
DagRunFinished TaskQueued TaskLaunched TaskStarted TaskHeartbeat TaskSucceeded TaskFailed TaskRetryScheduled
TaskDeclaredDead TaskAdopted PodFinished TriggerDagRun ClearTask MarkTask PauseDag""".split()

_text = st.text(max_size=40)
_scalars = {str: _text, int: st.integers(-(2**63), 2**63 - 1), bool: st.booleans(),
            float: st.floats(allow_nan=False), bytes: st.binary(max_size=40)}


def strategy_for(hint: typing.Any) -> st.SearchStrategy:
    """Values of a declared field type (used to generate events)."""
    if hint in _scalars:
        return _scalars[hint]
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list:
        return st.lists(strategy_for(args[0]), max_size=3)
    if typing.get_origin(hint) is dict:
        return st.dictionaries(_text, strategy_for(args[1]), max_size=3)
    if dataclasses.is_dataclass(hint):
        return instances_of(hint)
    return st.none() | strategy_for(next(arg for arg in args if arg is not type(None)))


def instances_of(cls: type) -> st.SearchStrategy:
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{item.name: strategy_for(hints[item.name]) for item in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda cls: cls.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_event_round_trips(cls, data):
    event = data.draw(instances_of(cls))
    assert schemas.decode(schemas.encode(event)) == event


def test_the_codec_knows_every_declaration():
    assert {cls.__name__: cls for cls in EVENT_CLASSES} == schemas.EVENT_TYPES
    for name, cls in schemas.EVENT_TYPES.items():
        assert schemas.event_type(name) is cls


def test_design_events_are_declared():
    assert sorted(set(DESIGN_EVENTS) - set(schemas.EVENT_TYPES)) == []


def test_declarations_match_their_frozen_schemas():
    assert drifted() == []
    for cls in ALL_EVENTS:
        assert frozen_schema(cls.__name__, cls.VERSION) == json.loads(json.dumps(avro_schema(cls)))


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda cls: cls.__name__)
def test_every_version_ever_written_is_kept_with_a_sample(cls):
    assert frozen_versions(cls.__name__) == list(range(1, cls.VERSION + 1))
    for version in frozen_versions(cls.__name__):
        assert (SAMPLES_DIR / f"{cls.__name__}.v{version}.json").exists()


SAMPLES = sorted(SAMPLES_DIR.glob("*.json"))


def _declared_default(item: dataclasses.Field):
    return item.default if item.default is not dataclasses.MISSING else item.default_factory()


def _as_written(current, written):
    """``current`` (a decoded value) as a dict reduced to the fields the old sample had: fields
    added to a nested record since (e.g. DagDefinition.on_failure in DagParsed v2) must hold
    their declared default."""
    if dataclasses.is_dataclass(current) and isinstance(written, dict):
        added = [item for item in dataclasses.fields(current) if item.name not in written]
        assert all(getattr(current, item.name) == _declared_default(item) for item in added), added
        return {key: _as_written(getattr(current, key), value) for key, value in written.items()
                if hasattr(current, key)}
    if isinstance(current, list) and isinstance(written, list) and len(current) == len(written):
        return [_as_written(now, then) for now, then in zip(current, written, strict=False)]
    return dataclasses.asdict(current) if dataclasses.is_dataclass(current) else current


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.stem)
def test_old_samples_decode_to_the_current_declaration(path):
    sample = json.loads(path.read_text())
    decoded = schemas.decode(bytes.fromhex(sample["hex"]))
    name = path.stem.split(".")[0]
    assert type(decoded) is schemas.event_type(name)
    current = dataclasses.asdict(decoded)
    shared = set(current) & set(sample["fields"])
    assert {key: _as_written(getattr(decoded, key), sample["fields"][key]) for key in shared} == {
        key: sample["fields"][key] for key in shared}
    for key in set(current) - shared:  # fields added since: their declared default
        assert current[key] == _declared_default(next(item for item in dataclasses.fields(decoded)
                                                      if item.name == key))


def test_an_evolved_event_decodes_its_first_version():
    sample = json.loads((SAMPLES_DIR / "TaskFailed.v1.json").read_text())
    assert "traceback" not in sample["fields"]
    assert schemas.decode(bytes.fromhex(sample["hex"])).traceback == ""


def _header(name: str, version: int) -> bytes:
    return bytes([MAGIC, len(name)]) + name.encode() + version.to_bytes(2, "big")


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (b"", schemas.DecodeError, "bad or missing header"),
        (None, schemas.DecodeError, "bad or missing header"),
        (b"\x07\x01garbage", schemas.DecodeError, "bad or missing header"),
        (b"\x00\x00\x00\x00\x2agarbage", schemas.DecodeError, "no schema registry is configured"),
        (_header("NoSuchEvent", 1) + b"\x00", schemas.UnknownEventType, "unknown event type 'NoSuchEvent'"),
        (_header("TaskQueued", 99) + b"\x00", schemas.UnknownSchemaVersion, "TaskQueued has no frozen schema v99"),
        (_header("TaskQueued", 1) + b"\x06et", schemas.DecodeError, "corrupt TaskQueued body"),
        (bytes([MAGIC, 30]) + b"Task", schemas.DecodeError, "truncated header"),
    ],
)
def test_bad_records_are_clear_errors(value, error, message):
    with pytest.raises(error, match=message):
        schemas.decode(value)


def test_peek_type_reads_only_the_header():
    event = schemas.TaskSucceeded(dag_id="d", run_id="r", task_id="t", try_number=1, runner_id="x", at=1.0)
    assert schemas.peek_type(schemas.encode(event)) == "TaskSucceeded"
    assert schemas.peek_type(b"junk") is None


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_reader_agrees_with_fastavro(cls, data):
    """The generated reader of the current version decodes exactly what fastavro does."""
    import io

    from fastavro import parse_schema, schemaless_reader

    from schemas.codec import _from_record_fn
    from schemas.fastread import compile_reader

    event = data.draw(instances_of(cls))
    value = schemas.encode(event)
    start = value[1] + 4
    fields = schemaless_reader(io.BytesIO(value[start:]), parse_schema(avro_schema(cls)), None)
    generated, end = compile_reader(cls)(value, start)
    assert generated == _from_record_fn(cls)(fields) == event
    assert end == len(value)


@pytest.mark.parametrize("cut", [1, 5, 12, 30])
def test_truncated_bodies_are_decode_errors(cut):
    event = schemas.TaskQueued(dag_id="etl", run_id="r1", task_id="extract", try_number=3, executor="local",
                               queue="default", scheduler_id="s1", at=1.5)
    value = schemas.encode(event)
    with pytest.raises(schemas.DecodeError, match="corrupt TaskQueued body"):
        schemas.decode(value[:-cut])


def test_trailing_bytes_are_a_decode_error():
    event = schemas.TaskSucceeded(dag_id="d", run_id="r", task_id="t", try_number=1, runner_id="x", at=1.0)
    with pytest.raises(schemas.DecodeError, match="body ends at byte"):
        schemas.decode(schemas.encode(event) + b"\x00")
