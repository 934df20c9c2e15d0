"""Tock's topics read by a consumer that knows nothing of Tock: confluent-kafka's SchemaRegistryClient and
AvroDeserializer against the real registry (Apicurio, started by infra/scripts/schema-registry.sh) decode
one record of every event type on every topic; the subjects are `<topic>-value` with BACKWARD compatibility;
a record written before the registry (Tock's own frame) still reads through Tock's codec beside them."""

from __future__ import annotations

import base64
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

import schemas
from infra.log import KafkaEventLog, partition_for, routing_key
from infra.registry import register_all
from infra.topics import ensure_topics, topic_name
from schemas.freeze import sample
from schemas.union import EVENT_CLASSES
from schemas.wire import registry_text, subject, topic_union
from tests.plain_records import plain

pytestmark = pytest.mark.integration
GO_READER = Path(__file__).resolve().parents[1] / "interop" / "go"




def _unnamed(value):
    """A record read with return_record_name, its nested optional records' (name, record) pairs unwrapped."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and value[0].startswith("dev.tock."):
        return _unnamed(value[1])
    if isinstance(value, list):
        return [_unnamed(item) for item in value]
    if isinstance(value, dict):
        return {key: _unnamed(item) for key, item in value.items()}
    return value


def _read_all(settings, topics: list[str], expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "outsider",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0) for topic in topics
                         for partition in range(settings.partitions)])
        found = []
        for _ in range(200):  # each poll waits up to a second: a deadline of ~200 s on a loaded machine
            found += [message for message in consumer.consume(500, 1.0) if message.error() is None]
            if len(found) >= expected:
                break
        return found
    finally:
        consumer.close()


def test_a_registry_aware_consumer_decodes_every_event_on_every_topic(make_settings, schema_registry_url):
    settings = make_settings(schema_registry_url=schema_registry_url)
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    registered = register_all(settings)
    logicals = sorted({cls.TOPIC for cls in EVENT_CLASSES})
    assert sorted(registered) == sorted(topic_name(settings.topic_prefix, logical) for logical in logicals)

    log = KafkaEventLog(settings)
    events = [sample(cls) for cls in EVENT_CLASSES]
    for event in events:
        log.append(event)
    legacy = schemas.TaskStarted(**{**plain(sample(schemas.TaskStarted)), "task_id": "written-before"})
    key, partition_key = routing_key(legacy)
    log.append_raw(legacy.TOPIC, schemas.encode(legacy), key, partition_for(partition_key, settings.partitions))
    log.flush()
    log.close()

    client = SchemaRegistryClient({"url": schema_registry_url})
    for topic in registered:
        assert client.get_compatibility(subject(topic)) == "BACKWARD"
    deserialize = AvroDeserializer(client, return_record_name=True)
    messages = _read_all(settings, list(registered), len(events) + 1)
    decoded, old_frames = {}, []
    for message in messages:
        if message.value()[0] != 0:
            old_frames.append(schemas.decode(message.value()))
            continue
        name, record = deserialize(message.value(), SerializationContext(message.topic(), MessageField.VALUE))
        decoded[(message.topic(), name)] = _unnamed(record)
    expected = {(topic_name(settings.topic_prefix, event.TOPIC), f"dev.tock.{type(event).__name__}"): plain(event)
                for event in events}
    assert decoded == expected
    assert old_frames == [legacy]


def _json_plain(value):
    """An event's fields as a JSON decoder reads them back (bytes are base64, as Go's encoding/json writes)."""
    return json.loads(json.dumps(plain(value), default=lambda data: base64.b64encode(data).decode()))


def test_a_go_consumer_decodes_the_same_records(make_settings, schema_registry_url):
    """A second language, no Tock code: franz-go reads the topics, hamba/avro decodes with the registry's schema."""
    built = subprocess.run(["bash", str(GO_READER / "build.sh")], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    settings = make_settings(schema_registry_url=schema_registry_url)
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    topics = sorted(register_all(settings))
    log = KafkaEventLog(settings)
    events = [sample(cls) for cls in EVENT_CLASSES]
    for event in events:
        log.append(event)
    log.flush()
    log.close()
    read = subprocess.run([built.stdout.strip().splitlines()[-1], "-brokers", settings.bootstrap,
                           "-registry", schema_registry_url, "-topics", ",".join(topics),
                           "-expect", str(len(events)), "-timeout", "180s"],
                          capture_output=True, text=True, timeout=240)
    assert read.returncode == 0, read.stderr
    lines = [json.loads(text) for text in read.stdout.splitlines()]
    decoded = {(line["topic"], line["event"]): line["record"] for line in lines}
    expected = {(topic_name(settings.topic_prefix, event.TOPIC), f"dev.tock.{type(event).__name__}"):
                _json_plain(event) for event in events}
    assert decoded == expected


def test_the_registry_refuses_a_release_that_could_not_read_the_records_before_it(make_settings,
                                                                                   schema_registry_url):
    """BACKWARD compatibility is enforced by the registry itself: a union whose TaskStarted gained a field
    without a default could not read the records already written, so it gets no id."""
    settings = make_settings(schema_registry_url=schema_registry_url)
    topic = topic_name(settings.topic_prefix, "events")
    register_all(settings)
    union = json.loads(topic_union("events").text)
    started = next(branch for branch in union if branch["name"] == "TaskStarted")
    started["fields"].append({"name": "added_without_default", "type": "string"})
    client = SchemaRegistryClient({"url": schema_registry_url})
    from confluent_kafka.schema_registry import Schema

    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject(topic), Schema(registry_text(union), "AVRO"))
    assert refused.value.http_status_code == 409
