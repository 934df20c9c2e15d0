"""The schema registry that infra/scripts/schema-registry.sh starts (Apicurio, Confluent-compatible API).

Subjects are ``<topic>-value`` with BACKWARD compatibility; records use the Confluent wire format
(magic byte 0, 4-byte big-endian schema id, Avro body). A registry that is not running fails
these tests (the session fixture starts it through ``infra/scripts/schema-registry.sh start``).
"""

from __future__ import annotations

import json

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.integration

TOPIC = "demo"
SUBJECT = f"{TOPIC}-value"
DEMO_V1 = {"type": "record", "name": "Demo", "namespace": "dev.tock.demo",
           "fields": [{"name": "dag_id", "type": "string"}]}
# Adds a field with a default: a v2 reader still reads v1 records (BACKWARD).
DEMO_V2 = {**DEMO_V1, "fields": [*DEMO_V1["fields"], {"name": "attempt", "type": "int", "default": 1}]}
# Changes a field's type: v1 records cannot be read with it.
DEMO_INCOMPATIBLE = {**DEMO_V1, "fields": [{"name": "dag_id", "type": "long"}]}


def avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.fixture
def registry_url(schema_registry_url: str) -> str:
    """The session's registry (tests/conftest.py starts it through the script)."""
    return schema_registry_url


@pytest.fixture
def client(registry_url: str) -> SchemaRegistryClient:
    """A client on a fresh ``demo-value`` subject (the registry keeps subjects across runs)."""
    registry = SchemaRegistryClient({"url": registry_url})
    if SUBJECT in registry.get_subjects():
        registry.delete_subject(SUBJECT)
        registry.delete_subject(SUBJECT, permanent=True)
    return registry


def test_backward_compatibility_accepts_an_added_default_and_refuses_a_type_change(
        client: SchemaRegistryClient) -> None:
    first_id = client.register_schema(SUBJECT, avro(DEMO_V1))
    assert client.set_compatibility(SUBJECT, "BACKWARD") == {"compatibilityLevel": "BACKWARD"}
    assert client.get_compatibility(SUBJECT) == "BACKWARD"

    second_id = client.register_schema(SUBJECT, avro(DEMO_V2))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(SUBJECT, avro(DEMO_INCOMPATIBLE))

    assert second_id != first_id
    assert refused.value.http_status_code == 409
    assert client.test_compatibility(SUBJECT, avro(DEMO_INCOMPATIBLE)) is False
    assert client.get_versions(SUBJECT) == [1, 2]
    assert client.get_latest_version(SUBJECT).schema_id == second_id


def test_schema_ids_name_content(client: SchemaRegistryClient, registry_url: str) -> None:
    schema_id = client.register_schema(SUBJECT, avro(DEMO_V1))

    assert json.loads(client.get_schema(schema_id).schema_str) == DEMO_V1
    answer = httpx.get(f"{registry_url}/schemas/ids/{schema_id}", timeout=10)
    assert answer.status_code == 200
    assert json.loads(answer.json()["schema"]) == DEMO_V1
    # Apicurio's ccompat API gives the content id: the same schema under another subject keeps its id.
    other_subject = f"{TOPIC}-copy-value"
    try:
        assert client.register_schema(other_subject, avro(DEMO_V1)) == schema_id
    finally:
        client.delete_subject(other_subject)
        client.delete_subject(other_subject, permanent=True)


def test_records_round_trip_in_the_confluent_wire_format(client: SchemaRegistryClient) -> None:
    client.register_schema(SUBJECT, avro(DEMO_V1))
    client.set_compatibility(SUBJECT, "BACKWARD")
    second_id = client.register_schema(SUBJECT, avro(DEMO_V2))
    context = SerializationContext(TOPIC, MessageField.VALUE)
    serialize = AvroSerializer(client, json.dumps(DEMO_V2), conf={"auto.register.schemas": False})
    serialize_v1 = AvroSerializer(client, json.dumps(DEMO_V1), conf={"auto.register.schemas": False})

    record = serialize({"dag_id": "etl", "attempt": 3}, context)
    old_record = serialize_v1({"dag_id": "etl"}, context)

    assert record[0] == 0
    assert int.from_bytes(record[1:5], "big") == second_id
    assert AvroDeserializer(client)(record, context) == {"dag_id": "etl", "attempt": 3}
    # A v1 record read with the v2 schema gets the new field's default: what BACKWARD promises.
    assert AvroDeserializer(client, json.dumps(DEMO_V2))(old_record, context) == {"dag_id": "etl", "attempt": 1}


def _register_at_once(url: str, subjects: list[str], barrier, results) -> None:
    from infra.registry import HttpRegistry, RegistryError

    for subject in subjects:
        barrier.wait(30)  # every process sets the new subject's rule at the same moment
        try:
            results.put(HttpRegistry(url, timeout=30).register(subject, json.dumps(DEMO_V1)))
        except RegistryError as error:
            results.put(str(error))


def test_processes_registering_a_new_subject_at_once_all_get_its_id(registry_url: str) -> None:
    """Runners (each Celery pool process's) register a topic's union the moment they first write to it: for a new
    subject they race to create its compatibility rule, and the registry refuses the losers with HTTP 409. Every
    one must still get the id (a loser crashed its runner, and its try was run again: a loaded full run)."""
    import multiprocessing
    import uuid

    context = multiprocessing.get_context("fork")
    subjects = [f"race-{uuid.uuid4().hex[:12]}-value" for _ in range(10)]
    barrier, results = context.Barrier(12), context.Queue()
    processes = [context.Process(target=_register_at_once, args=(registry_url, subjects, barrier, results))
                 for _ in range(12)]
    for process in processes:
        process.start()
    found = [results.get(timeout=120) for _ in range(12 * len(subjects))]
    for process in processes:
        process.join(30)
    refused = [result for result in found if isinstance(result, str)]
    assert not refused, refused[:3]
    assert len(found) == 12 * len(subjects)
