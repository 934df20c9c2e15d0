"""The event catalog (schemas/catalog.py): docs/asyncapi.json is what the declarations give, and it shows every
topic, key, partitioning rule, event, field and version as the code writes them."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from infra.topics import SPECS, TopicSpec
from schemas.avro import frozen_schema, frozen_versions
from schemas.catalog import (
    AVRO_FORMAT,
    CATALOG_PATH,
    REGENERATE,
    ROUTE_KEYS,
    asyncapi_document,
    catalog_text,
    frame_header,
)
from schemas.routing import ROUTES
from schemas.union import EVENT_CLASSES
from tock_cli import app

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "schemas" / "samples"


@pytest.fixture(scope="module")
def document():
    return asyncapi_document(SPECS)


def _first_difference(committed: str, generated: str) -> str:
    pairs = zip(committed.splitlines(), generated.splitlines(), strict=False)
    line, (was, now) = next(((number, pair) for number, pair in enumerate(pairs, 1) if pair[0] != pair[1]),
                            (min(committed.count("\n"), generated.count("\n")) + 1, ("<end>", "<end>")))
    return f"first difference at line {line}:\n  committed: {was[:200]}\n  generated: {now[:200]}"


def test_the_committed_catalog_is_what_the_declarations_give():
    path = REPO / CATALOG_PATH
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    generated = catalog_text(SPECS)
    if committed != generated:
        pytest.fail(f"{CATALOG_PATH} does not match the event declarations and topics (an event, a schema version, "
                    f"a route or a topic changed): run `{REGENERATE}` and commit it.\n"
                    + _first_difference(committed, generated), pytrace=False)


def test_the_document_is_byte_stable_whatever_the_order_of_the_topics():
    assert catalog_text(SPECS) == catalog_text(tuple(reversed(SPECS)))


def test_every_topic_is_a_channel_and_reading_it_an_operation(document):
    assert set(document["channels"]) == {spec.logical for spec in SPECS}
    for spec in SPECS:
        channel = document["channels"][spec.logical]
        assert channel["address"] == f"{{prefix}}tock.{spec.logical}"
        configuration = channel["bindings"]["kafka"]["topicConfiguration"]
        assert configuration["cleanup.policy"] == sorted(spec.cleanup.split(","))
        assert {key: str(value) for key, value in configuration.items() if key != "cleanup.policy"} == {
            **spec.configs, **spec.upheld}
        operation = document["operations"][f"read-{spec.logical}"]
        assert operation["action"] == "receive"
        assert operation["channel"] == {"$ref": f"#/channels/{spec.logical}"}
        assert [ref["$ref"].rsplit("/", 1)[1] for ref in operation["messages"]] == list(channel["messages"])


def test_every_version_of_every_event_is_a_message_of_its_topic_with_its_frozen_schema(document):
    messages = document["components"]["messages"]
    for cls in EVENT_CLASSES:
        name = cls.__name__
        assert frozen_versions(name) == list(range(1, cls.VERSION + 1))
        for version in frozen_versions(name):
            message_id = f"{name}.v{version}"
            message = messages[message_id]
            assert message["payload"] == {"schemaFormat": AVRO_FORMAT, "schema": frozen_schema(name, version)}
            assert message["name"] == name and message["x-tock-version"] == version
            assert message["title"].endswith("(current)") == (version == cls.VERSION)
            assert document["channels"][cls.TOPIC]["messages"][message_id] == {
                "$ref": f"#/components/messages/{message_id}"}
    events = {f"{cls.__name__}.v{version}" for cls in EVENT_CLASSES for version in frozen_versions(cls.__name__)}
    avro = {key for key, message in messages.items() if message["payload"].get("schemaFormat") == AVRO_FORMAT}
    assert avro == events


def test_each_message_names_its_record_key_and_partition_key(document):
    for cls in EVENT_CLASSES:
        keys = ROUTE_KEYS[cls.ROUTE.name]
        message = document["components"]["messages"][f"{cls.__name__}.v{cls.VERSION}"]
        assert message["bindings"]["kafka"]["key"]["description"] == f"`{keys.record_key}`"
        assert message["x-tock-partition-key"] == keys.partition_key
        assert f"under the key `{keys.record_key}`, in the partition of `{keys.partition_key}`" in (
            message["description"])


def _expand(template: str, values: dict[str, object]) -> str:
    """A ROUTE_KEYS template with these field values; ``[...]`` kept only when map_index >= 0."""
    template = re.sub(r"\[(.*?)\]", r"\1" if int(str(values.get("map_index", -1))) >= 0 else "", template)
    return template.format(**values)


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
@pytest.mark.parametrize("map_index", [-1, 0, 7])
def test_the_keys_the_catalog_shows_are_those_the_routing_rule_writes(route, map_index):
    values: dict[str, object] = {field: f"<{field}>" for field in route.fields}
    values |= {"map_index": map_index, "try_number": 3} if "map_index" in route.fields else {}
    record_key, partition_key = route.keys(SimpleNamespace(**values))
    assert (_expand(ROUTE_KEYS[route.name].record_key, values),
            _expand(ROUTE_KEYS[route.name].partition_key, values)) == (record_key, partition_key)


def test_every_routing_rule_has_its_keys_described():
    assert set(ROUTE_KEYS) == {route.name for route in ROUTES}


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.json")), ids=lambda path: path.stem)
def test_the_frame_the_catalog_describes_is_how_each_version_s_sample_record_starts(sample, document):
    name, version = sample.stem.rsplit(".v", 1)
    value = bytes.fromhex(json.loads(sample.read_text())["hex"])
    header = frame_header(name, int(version))
    assert value.startswith(header)
    assert document["components"]["messages"][sample.stem]["x-tock-frame"] == header.hex(" ")


def test_a_version_says_which_fields_changed_nested_ones_too(document):
    messages = document["components"]["messages"]
    assert "Since v21: added `definition.description`" in messages["DagParsed.v22"]["description"]
    assert "`definition.tasks[].owner`" in messages["DagParsed.v22"]["description"]
    assert "Since v1: added `traceback`" in messages["TaskFailed.v2"]["description"]
    assert "superseded" in messages["TaskFailed.v1"]["description"]


def test_a_changed_topic_changes_the_document_and_its_version():
    changed = tuple(dataclasses.replace(spec, cleanup="compact") if spec.logical == "logs" else spec for spec in SPECS)
    before, after = asyncapi_document(SPECS), asyncapi_document(changed)
    assert after["channels"]["logs"]["bindings"]["kafka"]["topicConfiguration"]["cleanup.policy"] == ["compact"]
    assert before["info"]["version"] != after["info"]["version"]


def test_a_topic_or_event_the_catalog_cannot_describe_is_an_error():
    with pytest.raises(ValueError, match="no description"):
        asyncapi_document((*SPECS, TopicSpec("audit", "delete")))
    with pytest.raises(ValueError, match="not among the topics given"):
        asyncapi_document(tuple(spec for spec in SPECS if spec.logical != "heartbeats"))


def test_the_cli_prints_writes_and_checks_the_document(tmp_path):
    runner, target = CliRunner(), tmp_path / "asyncapi.json"
    printed = runner.invoke(app, ["schemas", "catalog"])
    assert printed.exit_code == 0 and printed.stdout == catalog_text(SPECS)
    assert runner.invoke(app, ["schemas", "catalog", "--output", str(target), "--check"]).exit_code == 1
    assert runner.invoke(app, ["schemas", "catalog", "--output", str(target)]).exit_code == 0
    assert target.read_text(encoding="utf-8") == catalog_text(SPECS)
    assert runner.invoke(app, ["schemas", "catalog", "--output", str(target), "--check"]).exit_code == 0
