"""The Schema Registry wire format (schemas/wire.py, schemas/codec.py encode_record): magic 0, a 4-byte
schema id, then the Avro encoding of the topic's union. The registry here is a dict that numbers schemas
as a registry does (the real one, Apicurio, is exercised by tests/integration/test_registry_wire.py)."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

import schemas
from schemas import codec
from schemas.avro import frozen_schema
from schemas.declare import EVENTS
from schemas.freeze import sample
from schemas.union import EVENT_CLASSES
from schemas.wire import IDS, SchemaIds, UnknownSchemaId, branches_of, subject, topic_events, topic_union
from tests.plain_records import plain

TOPIC = "t1.tock.events"


class NumberingRegistry:
    """Ids in registration order, one per distinct schema text; counts the calls."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.subjects: dict[str, list[int]] = {}
        self.calls = 0

    def register(self, subject_name: str, schema: str) -> int:
        self.calls += 1
        if schema not in self.texts:
            self.texts.append(schema)
        schema_id = self.texts.index(schema) + 1
        self.subjects.setdefault(subject_name, []).append(schema_id)
        return schema_id

    def schema(self, schema_id: int) -> str:
        self.calls += 1
        if not 1 <= schema_id <= len(self.texts):
            raise UnknownSchemaId(f"no schema {schema_id}")
        return self.texts[schema_id - 1]


@pytest.fixture
def registry(monkeypatch):
    """The process's table, pointed at a fresh numbering registry for this test."""
    fresh = NumberingRegistry()
    monkeypatch.setattr(IDS, "registry", fresh)
    monkeypatch.setattr(IDS, "_writers", {})
    monkeypatch.setattr(IDS, "_branches", {})
    monkeypatch.setattr(codec, "_WIRE_PREFIXES", {})
    monkeypatch.setattr(codec, "_WIRE_DECODERS", {})
    return fresh


def test_every_topic_union_is_a_valid_avro_schema_that_names_its_own_branches():
    for logical in {cls.TOPIC for cls in EVENT_CLASSES}:
        union = topic_union(logical)
        parse_schema(json.loads(union.text))  # raises on a redefined or unknown name
        assert branches_of(union.text) == union.branches
        assert [name for name, _ in union.branches] == sorted(cls.__name__ for cls in topic_events(logical))


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
def test_each_event_round_trips_in_the_wire_format_and_any_avro_reader_reads_it(cls, registry):
    event = sample(cls)
    value = codec.encode_record(event, TOPIC if cls.TOPIC == EVENTS else f"t1.tock.{cls.TOPIC}", wire=True)
    assert value[0] == 0
    schema_id = int.from_bytes(value[1:5], "big")
    assert schemas.decode(value) == event
    # A reader that knows nothing of Tock: the registered schema and a general Avro library.
    read = schemaless_reader(io.BytesIO(value[5:]), parse_schema(json.loads(registry.texts[schema_id - 1])), None)
    assert read == {field.name: plain(getattr(event, field.name)) for field in dataclasses.fields(cls)}




def test_a_topic_is_registered_once_per_process_under_its_subject(registry):
    for try_number in range(5):
        event = schemas.TaskSucceeded(dag_id="d", run_id="r", task_id="t", try_number=try_number, runner_id="x",
                                      at=1.0)
        codec.encode_record(event, TOPIC, wire=True)
    codec.encode_record(sample(schemas.TaskQueued), TOPIC, wire=True)
    assert registry.calls == 1
    assert registry.subjects == {subject(TOPIC): [1]}


def test_a_record_of_an_older_release_decodes_by_the_branches_the_registry_holds(registry):
    """Another release's union: TaskQueued still at v1. Its id is unknown here, so the schema is
    fetched, its branches matched to frozen versions, and the v1 body resolved to the current event."""
    old_union = [frozen_schema("TaskSucceeded", schemas.TaskSucceeded.VERSION), frozen_schema("TaskQueued", 1)]
    schema_id = registry.register(subject(TOPIC), json.dumps(old_union))
    assert branches_of(json.dumps(old_union)) == (("TaskSucceeded", schemas.TaskSucceeded.VERSION), ("TaskQueued", 1))
    v1 = frozen_schema("TaskQueued", 1)
    current = sample(schemas.TaskQueued)
    old_record = {field["name"]: plain(getattr(current, field["name"])) for field in v1["fields"]}
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(v1), old_record)
    value = bytes([0]) + schema_id.to_bytes(4, "big") + bytes([2]) + body.getvalue()  # branch 1 = zigzag 2
    decoded = schemas.decode(value)
    assert isinstance(decoded, schemas.TaskQueued)
    assert decoded.dag_id == current.dag_id and decoded.task_id == current.task_id
    assert schemas.peek_type(value) == "TaskQueued"


def test_both_frames_decode_side_by_side(registry):
    """The one-way migration: records written before the registry (the 'T' frame) read as before."""
    event = sample(schemas.TaskStarted)
    assert schemas.decode(schemas.encode(event)) == schemas.decode(codec.encode_record(event, TOPIC, wire=True))
    assert schemas.decode(schemas.encode(event)) == event


def test_settings_without_a_registry_write_the_self_describing_frame_in_any_process(registry):
    """The frame follows the writer's settings, not the process: a process that met a registry through one
    service's settings still writes what a service configured without one reads."""
    event = sample(schemas.TaskStarted)
    assert codec.encode_record(event, TOPIC, wire=False) == schemas.encode(event)
    assert registry.calls == 0


@pytest.mark.parametrize(("tail", "message"), [
    (b"", "truncated Schema Registry frame"),
    (b"\x7f", "branch -64 of schema id 1"),
    (b"\x80\x02", "branch 128 of schema id 1"),
    (b"\x02\xff", "corrupt"),
])
def test_bad_wire_records_are_clear_errors(registry, tail, message):
    codec.encode_record(sample(schemas.TaskStarted), TOPIC, wire=True)  # registers id 1
    with pytest.raises(schemas.DecodeError, match=message):
        schemas.decode(b"\x00\x00\x00\x00\x01" + tail)


def test_an_id_the_registry_does_not_know_is_a_decode_error(registry):
    with pytest.raises(schemas.DecodeError, match="no schema 9"):
        schemas.decode(b"\x00\x00\x00\x00\x09\x00\x00")


def test_ids_pass_to_a_child_of_the_same_release_and_not_to_another():
    parent = SchemaIds()
    parent.use(NumberingRegistry())
    parent.writer(TOPIC, EVENTS)
    child = SchemaIds()
    assert child.imported(parent.exported(), {TOPIC: EVENTS}) == 1
    assert child.writer(TOPIC, EVENTS)[0] == parent.writer(TOPIC, EVENTS)[0]
    stale = json.loads(parent.exported())
    stale[TOPIC][1] = "another-release"
    assert SchemaIds().imported(json.dumps(stale), {TOPIC: EVENTS}) == 0
    assert SchemaIds().imported("not json", {TOPIC: EVENTS}) == 0
