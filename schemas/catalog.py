"""The event catalog: an AsyncAPI 3.0.0 document of Tock's topics and events, generated from the declarations.

Channels are Tock's topics (their address under the ``TOCK_TOPIC_PREFIX`` placeholder, their cleanup
policy and configs, their record keys and partitioning rules); messages are every version of every
event ever written, each with its frozen Avro schema (``schemas/avro/<Event>/v<N>.avsc``) inline; an
operation reads each channel. The topic settings come in as an argument (``infra.topics.SPECS``: this
layer imports nothing above it); everything else is read from ``schemas``. The same declarations always
give the same bytes, so the committed ``docs/asyncapi.json`` is checked against them
(tests/unit/test_catalog.py) and regenerated with ``tock schemas catalog --output docs/asyncapi.json``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from schemas.avro import frozen_schema, frozen_versions
from schemas.codec import MAGIC
from schemas.declare import DAGS, DEAD_LETTER, EVENTS, HEARTBEATS, LOGS, PARSING, SCHEDULERS, SECRETS, SNAPSHOTS, USERS
from schemas.routing import Route
from schemas.union import EVENT_CLASSES, Event
from schemas.wire import WIRE_MAGIC, topic_union

Json = dict[str, Any]

CATALOG_PATH = "docs/asyncapi.json"
REGENERATE = f"tock schemas catalog --output {CATALOG_PATH}"
AVRO_FORMAT = "application/vnd.apache.avro;version=1.9.0"
KAFKA_BINDING = "0.5.0"
PARTITIONER = ("(murmur2(UTF-8 bytes of the partition key) & 0x7fffffff) % N, the Java client's default partitioner "
               "(librdkafka's murmur2_random); N is TOCK_PARTITIONS, the same for every topic")


class TopicSettings(Protocol):
    """What the catalog reads of a topic's definition (``infra.topics.TopicSpec``)."""

    @property
    def logical(self) -> str: ...

    @property
    def cleanup(self) -> str: ...

    @property
    def configs(self) -> Mapping[str, str]: ...

    @property
    def upheld(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class RouteKeys:
    """A routing rule's keys as text: ``[...]`` is there only when ``map_index`` >= 0."""

    record_key: str
    partition_key: str


# The keys of each rule of schemas/routing.py (tests/unit/test_catalog.py checks them against the rules).
ROUTE_KEYS: dict[str, RouteKeys] = {
    "dag": RouteKeys("{dag_id}", "{dag_id}"),
    "task instance": RouteKeys("{dag_id}|{run_id}|{task_id}[|{map_index}]", "{dag_id}"),
    "try": RouteKeys("{dag_id}|{run_id}|{task_id}|{try_number}[|{map_index}]", "{dag_id}"),
    "file": RouteKeys("{file_path}", "{file_path}"),
    "scheduler": RouteKeys("{scheduler_id}", "{scheduler_id}"),
    "worker": RouteKeys("worker/{worker}", "worker/{worker}"),
    "user": RouteKeys("{username}", "{username}"),
    "variable": RouteKeys("variable/{key}", "variable/{key}"),
    "connection": RouteKeys("connection/{conn_id}", "connection/{conn_id}"),
    "pool": RouteKeys("pool/{pool}", "pool/{pool}"),
    "asset": RouteKeys("asset/{uri}", "asset/{uri}"),
}

# What each topic holds (DESIGN.md, "Topics").
HOLDS: dict[str, str] = {
    EVENTS: "Run and task lifecycle, operator commands, adoption, and the ledgers of what is shared across DAGs "
            "(pools, assets): the durable history every scheduler, the monitor and the projector fold.",
    HEARTBEATS: "Task heartbeats, kept out of the durable history: only the latest of each task instance matters.",
    DAGS: "The latest definition of each DAG; a tombstone (null value) when its file is gone.",
    PARSING: "The DAG processor's own lifecycle (processor started, finished, killed) and parse results.",
    SCHEDULERS: "Liveness of scheduler instances and of executor workers.",
    DEAD_LETTER: "Records that could not be decoded or applied, their key and value bytes as they were.",
    LOGS: "Task log lines shipped by runners, readable from any host (kept TOCK_TASK_LOG_RETENTION_HOURS, "
          "7 days by default).",
    USERS: "Accounts and API tokens: every change kept.",
    SECRETS: "Variables and connections of Tock's own store, values encrypted; compaction keeps the latest of each.",
    SNAPSHOTS: "Each scheduler and monitor partition's folded state and the offsets it covers (not events: "
               "internal, versioned formats that their writers refuse when they differ; not for integration).",
}

# The records that are not events (a tombstone, a dead letter, a snapshot), by topic.
_BYTES = {"type": "string", "contentMediaType": "application/octet-stream"}
_TOMBSTONE = {"type": "null", "description": "no value: compaction then forgets the key"}
_SOURCE_HEADERS = {
    "type": "object",
    "required": ["reason", "source.topic", "source.partition", "source.offset"],
    "properties": {
        "reason": {"type": "string", "description": "why the record could not be decoded or applied (UTF-8)"},
        "source.topic": {"type": "string", "description": "the topic it was read from (UTF-8)"},
        "source.partition": {"type": "string", "description": "its partition, a decimal number (ASCII)"},
        "source.offset": {"type": "string", "description": "its offset, a decimal number (ASCII)"},
    },
}


@dataclass(frozen=True, slots=True)
class RecordKind:
    """A kind of record that is not an event: its message id, what it is, its key, its value's schema and
    its Kafka headers' (only dead letters have headers)."""

    message_id: str
    summary: str
    key: str
    payload: Json
    headers: Json | None = None


RAW_RECORDS: dict[str, tuple[RecordKind, ...]] = {
    DAGS: (RecordKind("DagTombstone", "A DAG's definition is gone (its file was removed).", "{dag_id}", _TOMBSTONE),),
    DEAD_LETTER: (RecordKind(
        "DeadLetter", "A record set aside: its original key and value bytes (a Tock frame this code could not "
        "read, or no frame at all); headers say why and where it was.", "the original record's key",
        {**_BYTES, "description": "the original value"}, _SOURCE_HEADERS),),
    SNAPSHOTS: (
        RecordKind("SchedulerSnapshot", "A scheduler partition's folded state: b'TOCKSNAP\\n', a JSON header line, "
                   "zlib(body); or, for one too big for a record, a head (b'TOCKSNAP-PARTS\\n') naming its parts.",
                   "{partition}", {**_BYTES, "description": "services/scheduler/core/snapshot.py"}),
        RecordKind("SchedulerSnapshotPart", "A piece of a big scheduler snapshot (b'TOCKSNAP-PART\\n', a header "
                   "line, bytes); a tombstone deletes a part the latest head does not name.", "{partition}/{index}",
                   {"oneOf": [{**_BYTES, "description": "services/scheduler/core/snapshot_parts.py"}, _TOMBSTONE]}),
        RecordKind("MonitorSnapshot", "A monitor partition's folded state: b'TOCKMON\\n', a JSON header line, "
                   "zlib(JSON).", "monitor.{partition}",
                   {**_BYTES, "description": "services/monitor/core/snapshot.py"}),
    ),
}

# Where a record of a topic that holds no events goes, by topic.
RAW_PARTITIONS: dict[str, str] = {
    DEAD_LETTER: "the partition number of the record's source, modulo N: partition p still concerns the DAGs of p",
    SNAPSHOTS: "the partition the snapshot is of (written in the transaction that commits its offsets)",
}

LAYOUT = ("0x54 ('T') | name length (1 byte) | event type name (ASCII) | schema version (2 bytes, big-endian) "
          "| Avro binary body")
WIRE_LAYOUT = ("0x00 | schema id (4 bytes, big-endian) | Avro binary of the subject's union: branch index "
               "(zigzag varint), then the event's record")
FRAMING: Json = {
    "registry": {
        "layout": WIRE_LAYOUT,
        "magic": WIRE_MAGIC,
        "subject": "<topic>-value (the topic-name strategy), compatibility BACKWARD",
        "schema": "one per Tock release: the union of the current schema of every event on the topic, branches in "
                  "event-name order (the channel lists them), each named type defined once",
        "decoding": "any Schema Registry-aware Avro deserializer: fetch the id's schema, read the union; the "
                    "branch's record name is the event's name (dev.tock.<Event>)",
    },
    "layout": LAYOUT,
    "magic": MAGIC,
    "body": "Avro binary encoding of the record with the schema of that name and version (schemas/avro/<Event>/"
            "v<N>.avsc, the payload of the message of that version); no schema-registry id, no Kafka record headers",
    "decoding": "read the name and version from the frame, take that version's schema as the writer's schema and "
                "resolve it to the reader's (Avro schema resolution): every version ever written stays readable",
}

INTRO = """Every topic, record key, partitioning rule, event, field and schema version of Tock, a workflow \
scheduler whose truth is a Kafka log. Generated from the declarations in `schemas/` by `tock schemas catalog` \
(and served by the API at `GET /api/v1/catalog`); a test fails when a declaration changes and this document \
does not.

**Topics.** A channel per topic; its address is `{prefix}tock.<name>`, where `prefix` is TOCK_TOPIC_PREFIX \
(empty by default). Every topic has the same partition count N (TOCK_PARTITIONS) and, unless its channel says \
otherwise, a record goes to partition `(murmur2(partition key) & 0x7fffffff) % N` (Kafka's Java default \
partitioner, librdkafka's murmur2_random), its partition key being the dag_id wherever there is one, so \
partition p of every topic concerns the same DAGs. Each message names its record key and partition key; keys \
are part of the data and never change.

**Records.** With a schema registry configured (TOCK_SCHEMA_REGISTRY_URL), an event record's value is in \
the Schema Registry wire format: """ + WIRE_LAYOUT + """. The subject `{prefix}tock.<name>-value` holds, per \
Tock release, the union of the current schemas of the topic's events (BACKWARD compatibility enforced by the \
registry), so any registry-aware consumer decodes it; the branch's record name names the event. Without a \
registry, and in records written before one was configured, the value is Tock's self-describing frame, then \
Avro: """ + LAYOUT + """. That frame's \
name and version pick the message (one message per event and version, `<Event>.v<N>`, its frozen Avro schema \
as payload); decode the body with that schema as the writer's schema and resolve it to the one you read with: \
every version ever written stays readable. Event records carry no Kafka headers.

**Reading.** Schedulers and the monitor write in Kafka transactions: read with \
`isolation.level=read_committed`, or you will see records of aborted transactions. On compacted topics a \
record with a null value (a tombstone) deletes its key."""


def asyncapi_document(topics: Sequence[TopicSettings]) -> Json:
    """The catalog of ``topics`` (``infra.topics.SPECS``) and every event declared, as a JSON object."""
    events = _events_by_topic(topics)
    messages = {message_id: message for cls in EVENT_CLASSES for message_id, message in _event_messages(cls)}
    messages.update({record.message_id: _raw_message(record) for records in RAW_RECORDS.values()
                     for record in records})
    channels = {spec.logical: _channel(spec, events[spec.logical]) for spec in sorted(topics, key=_logical)}
    body: Json = {"channels": channels, "operations": _operations(channels),
                  "components": {"messages": dict(sorted(messages.items())), "messageTraits": _traits()}}
    return {"asyncapi": "3.0.0", "id": "urn:tock:event-catalog", "info": _info(body),
            "defaultContentType": "application/octet-stream", "servers": _servers(), **body}


def render(document: Json) -> str:
    """The document's text: what ``docs/asyncapi.json`` holds."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def catalog_text(topics: Sequence[TopicSettings]) -> str:
    """The text of the catalog of ``topics``."""
    return render(asyncapi_document(topics))


def _logical(spec: TopicSettings) -> str:
    return spec.logical


def _events_by_topic(topics: Sequence[TopicSettings]) -> dict[str, list[type[Event]]]:
    found: dict[str, list[type[Event]]] = {spec.logical: [] for spec in topics}
    for cls in sorted(EVENT_CLASSES, key=lambda cls: cls.__name__):
        if cls.TOPIC not in found:
            raise ValueError(f"{cls.__name__} is written to {cls.TOPIC}, which is not among the topics given")
        found[cls.TOPIC].append(cls)
    return found


def _info(body: Json) -> Json:
    # The version names the content: any change to a channel or message gives another.
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    return {"title": "Tock event catalog", "version": f"sha256-{digest}", "description": INTRO}


def _servers() -> Json:
    return {"kafka": {"host": "{bootstrap}", "protocol": "kafka",
                      "description": "The Kafka cluster of a Tock deployment (TOCK_KAFKA_BOOTSTRAP; unset: the local "
                                     "broker `tock broker start` runs).",
                      "variables": {"bootstrap": {"default": "127.0.0.1:9092",
                                                  "description": "bootstrap servers, host:port[,host:port...]"}}}}


def _traits() -> Json:
    return {"tockEvent": {"x-tock-framing": FRAMING}}


# --- channels and operations --------------------------------------------------------------------


def _channel(spec: TopicSettings, events: list[type[Event]]) -> Json:
    if spec.logical not in HOLDS:
        raise ValueError(f"topic {spec.logical} has no description in schemas/catalog.py HOLDS")
    ids = [message_id for cls in events for message_id in _message_ids(cls)]
    ids += [record.message_id for record in RAW_RECORDS.get(spec.logical, ())]
    if not ids:
        raise ValueError(f"topic {spec.logical} holds no event and no record kind the catalog knows")
    address = f"{{prefix}}tock.{spec.logical}"
    return {
        "address": address,
        "title": f"tock.{spec.logical}",
        "summary": HOLDS[spec.logical],
        "description": _channel_description(spec, events),
        "parameters": {"prefix": {"description": "TOCK_TOPIC_PREFIX, empty by default", "default": ""}},
        "messages": {message_id: {"$ref": f"#/components/messages/{message_id}"} for message_id in ids},
        "bindings": {"kafka": {"topicConfiguration": _topic_configuration(spec), "bindingVersion": KAFKA_BINDING}},
    }


def _channel_description(spec: TopicSettings, events: list[type[Event]]) -> str:
    lines = [HOLDS[spec.logical], "", f"cleanup.policy={spec.cleanup}" + "".join(
        f", {key}={value}" for key, value in sorted({**spec.configs, **spec.upheld}.items())) + "."]
    if events:
        lines += ["", f"Schema Registry subject `{{prefix}}tock.{spec.logical}-value`; union branches in order: "
                  + ", ".join(f"{name} (v{version})" for name, version in topic_union(spec.logical).branches) + "."]
    routes = sorted({cls.ROUTE.name for cls in events})
    if routes:
        lines += ["", f"Partition: {PARTITIONER}.", "", "Record key → partition key, by routing rule:"]
        lines += [f"- {name}: `{ROUTE_KEYS[name].record_key}` → `{ROUTE_KEYS[name].partition_key}`" for name in routes]
    if spec.logical in RAW_PARTITIONS:
        lines += ["", f"Partition: {RAW_PARTITIONS[spec.logical]}."]
    for record in RAW_RECORDS.get(spec.logical, ()):
        lines += ["", f"{record.message_id} (key `{record.key}`): {record.summary}"]
    return "\n".join(lines)


def _topic_configuration(spec: TopicSettings) -> Json:
    configs: Json = {"cleanup.policy": sorted(spec.cleanup.split(","))}
    for key, value in sorted({**spec.configs, **spec.upheld}.items()):
        configs[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
    return configs


def _operations(channels: Json) -> Json:
    return {f"read-{logical}": {
        "action": "receive",
        "title": f"Read tock.{logical}",
        "summary": "Consume the topic (read_committed).",
        "channel": {"$ref": f"#/channels/{logical}"},
        "messages": [{"$ref": f"#/channels/{logical}/messages/{message_id}"} for message_id in channel["messages"]],
    } for logical, channel in channels.items()}


# --- messages -----------------------------------------------------------------------------------


def _message_ids(cls: type[Event]) -> list[str]:
    return [f"{cls.__name__}.v{version}" for version in frozen_versions(cls.__name__)]


def _event_messages(cls: type[Event]) -> list[tuple[str, Json]]:
    """(message id, message) of every version of an event, oldest first."""
    name = cls.__name__
    versions = frozen_versions(name)
    if versions != list(range(1, cls.VERSION + 1)):
        raise ValueError(f"{name} v{cls.VERSION}: frozen schemas {versions} are not v1..v{cls.VERSION}")
    return [(f"{name}.v{version}", _event_message(cls, version)) for version in versions]


def _event_message(cls: type[Event], version: int) -> Json:
    name, keys = cls.__name__, _route_keys(cls.ROUTE)
    summary, doc = _doc(cls)
    current = version == cls.VERSION
    return {
        "name": name,
        "title": f"{name} v{version}" + (" (current)" if current else ""),
        "summary": summary,
        "description": _message_description(cls, version, doc if current else summary, keys),
        "traits": [{"$ref": "#/components/messageTraits/tockEvent"}],
        "payload": {"schemaFormat": AVRO_FORMAT, "schema": _schema(name, version)},
        "bindings": {"kafka": {"key": {"type": "string", "description": f"`{keys.record_key}`"},
                               "bindingVersion": KAFKA_BINDING}},
        "x-tock-event": name,
        "x-tock-version": version,
        "x-tock-current-version": cls.VERSION,
        "x-tock-frame": frame_header(name, version).hex(" "),
        "x-tock-partition-key": keys.partition_key,
    }


def _message_description(cls: type[Event], version: int, text: str, keys: RouteKeys) -> str:
    name = cls.__name__
    if version == cls.VERSION:
        status = f"Version {version}, the current one."
    else:
        status = (f"Version {version} of {cls.VERSION}: superseded, still read (a record written with it decodes "
                  f"to the current declaration by Avro schema resolution).")
    return "\n\n".join([
        text, status + _changes(name, version),
        f"Written to `{{prefix}}tock.{cls.TOPIC}` under the key `{keys.record_key}`, in the partition of "
        f"`{keys.partition_key}`" + (" (`[...]` only when map_index >= 0)" if "[" in keys.record_key else "") + ".",
        f"The value starts with the bytes `{frame_header(name, version).hex(' ')}` (hex), then the Avro body.",
    ])


def _changes(name: str, version: int) -> str:
    """What changed in the fields, nested records' included, since the version before (empty for v1)."""
    if version == 1:
        return ""
    before, now = _schema(name, version - 1), _schema(name, version)
    found = _field_changes(before, now, "", (_named(before), _named(now)))
    parts = [f"{what} {', '.join(f'`{path}`' for kind, path in found if kind == what)}"
             for what in ("added", "removed", "changed") if any(kind == what for kind, _path in found)]
    return f" Since v{version - 1}: " + "; ".join(parts) + "." if parts else f" Same fields as v{version - 1}."


def _field_changes(before: Json, now: Json, path: str, names: tuple[dict[str, Json], dict[str, Json]],
                   seen: frozenset[tuple[int, int]] = frozenset()) -> list[tuple[str, str]]:
    """(added | removed | changed, field path) between two record schemas; a nested record is compared
    field by field (``tasks[].owner``: the field ``owner`` of the records in the list ``tasks``), a record
    nested in itself once."""
    old, new = _fields(before), _fields(now)
    found = [("added", path + field) for field in new if field not in old]
    found += [("removed", path + field) for field in old if field not in new]
    seen = seen | {(id(before), id(now))}
    for field in (field for field in new if field in old):
        held = _inner_record(old[field]["type"], names[0]), _inner_record(new[field]["type"], names[1])
        if held[0] is not None and held[1] is not None and held[0][1] == held[1][1]:
            if (id(held[0][0]), id(held[1][0])) not in seen:
                found += _field_changes(held[0][0], held[1][0], f"{path}{field}{held[1][1]}.", names, seen)
        elif old[field] != new[field]:
            found.append(("changed", path + field))
    return found


def _inner_record(avro_type: Any, names: dict[str, Json]) -> tuple[Json, str] | None:
    """The record a field's type holds (itself, optional, in a list or a map) and how: "", "[]" or "{}"."""
    if isinstance(avro_type, str):
        named = names.get(avro_type)
        return None if named is None else (named, "")
    if isinstance(avro_type, list):
        others = [member for member in avro_type if member != "null"]
        return _inner_record(others[0], names) if len(others) == 1 else None
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            return avro_type, ""
        inner = {"array": ("items", "[]"), "map": ("values", "{}")}.get(avro_type.get("type", ""))
        if inner is not None and (held := _inner_record(avro_type[inner[0]], names)) is not None:
            return held[0], inner[1] + held[1]
    return None


def _named(schema: Any) -> dict[str, Json]:
    """Every record defined in a schema, by its full and its short name."""
    found: dict[str, Json] = {}
    if isinstance(schema, list):
        for member in schema:
            found.update(_named(member))
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            found[schema["name"]] = found[f"{schema.get('namespace', '')}.{schema['name']}"] = schema
            for field in schema["fields"]:
                found.update(_named(field["type"]))
        else:
            found.update(_named(schema.get("items")) | _named(schema.get("values")))
    return found


def _fields(schema: Json) -> dict[str, Json]:
    return {field["name"]: field for field in schema["fields"]}


def _schema(name: str, version: int) -> Json:
    schema = frozen_schema(name, version)
    if schema is None:
        raise ValueError(f"{name} has no frozen schema v{version}")
    return schema


def _doc(cls: type[Event]) -> tuple[str, str]:
    """(summary: the first sentence, the whole docstring) of an event's declaration."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    if not doc or doc.startswith(f"{cls.__name__}("):  # the dataclass's own signature: no docstring
        raise ValueError(f"{cls.__name__} has no docstring: the catalog describes every event by it")
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z`]|v\d)", " ".join(doc.split()), maxsplit=1)[0]
    return first, doc


def _route_keys(route: Route[Any]) -> RouteKeys:
    if route.name not in ROUTE_KEYS:
        raise ValueError(f"routing rule {route.name!r} has no keys in schemas/catalog.py ROUTE_KEYS")
    return ROUTE_KEYS[route.name]


def frame_header(name: str, version: int) -> bytes:
    """The bytes a record of event ``name`` written with schema ``version`` starts with (schemas/codec.py)."""
    encoded = name.encode("ascii")
    return bytes([MAGIC, len(encoded)]) + encoded + version.to_bytes(2, "big")


def _raw_message(record: RecordKind) -> Json:
    message: Json = {"name": record.message_id, "title": record.message_id, "summary": record.summary,
                     "payload": record.payload,
                     "bindings": {"kafka": {"key": {"type": "string", "description": f"`{record.key}`"},
                                            "bindingVersion": KAFKA_BINDING}}}
    if record.headers is not None:
        message["headers"] = record.headers
    return message

