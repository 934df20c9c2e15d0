"""Records in the Schema Registry wire format, which any registry-aware Kafka tool decodes.

Layout of a record value::

    0x00 | schema id (4 bytes, big endian) | Avro binary of the topic's union schema

A topic holds several event types, and a registry-aware consumer finds a record's schema by the
subject ``<topic>-value`` (the topic-name strategy). So that subject holds one schema per Tock
release: the union of the current record schema of every event declared on the topic, branches
ordered by event name, each named type defined once (later mentions use its full name). The body is
that union's Avro encoding: the branch index (a zigzag varint), then the event's record.

This module is pure: it builds the unions and keeps the table of schema ids. The ids come from a
:class:`Registry` (infra/registry.py talks to a real one over HTTP), asked once per topic for the
writer's id and once per unknown id for a reader; a record from another release names its branches
in the registry's copy of its schema, and each branch is matched to the frozen version of its event
with the same parsing canonical form, so older and newer records decode as before.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from fastavro.schema import expand_schema, to_parsing_canonical_form

from schemas.avro import NAMESPACE, avro_schema, frozen_schema, frozen_versions
from schemas.union import EVENT_CLASSES, Event

WIRE_MAGIC = 0x00
Json = Any
Branch = tuple[str, int]  # (event type name, schema version) of one branch of a union


class Registry(Protocol):
    """What the codec needs of a schema registry (its Confluent-compatible API)."""

    def register(self, subject: str, schema: str) -> int:
        """The id of ``schema`` under ``subject``, registered if new (BACKWARD compatibility kept)."""
        ...

    def schema(self, schema_id: int) -> str:
        """The schema text registered with ``schema_id``."""
        ...


class UnknownSchemaId(LookupError):
    """A record names a schema id this process cannot resolve (no registry, or the registry does not know it)."""


def subject(topic: str) -> str:
    """The subject of a topic's record values (the topic-name strategy)."""
    return f"{topic}-value"


def topic_events(logical: str) -> list[type[Event]]:
    """The events declared on logical topic ``logical``, in branch order."""
    return sorted((cls for cls in EVENT_CLASSES if cls.TOPIC == logical), key=lambda cls: cls.__name__)


@dataclass(frozen=True)
class TopicUnion:
    """One release's schema of a topic's values."""

    text: str  # the schema as registered (JSON)
    branches: tuple[Branch, ...]

    def index(self, name: str) -> int:
        for position, (branch, _version) in enumerate(self.branches):
            if branch == name:
                return position
        raise KeyError(f"{name} is not an event of this topic")


@cache
def topic_union(logical: str) -> TopicUnion:
    """The union of the current schemas of the events on ``logical``, as this release registers it."""
    events = topic_events(logical)
    if not events:
        raise ValueError(f"no event is declared on topic {logical!r}")
    defined: dict[str, Json] = {}
    branches = [_define_once(avro_schema(cls), defined) for cls in events]
    return TopicUnion(registry_text(branches), tuple((cls.__name__, cls.VERSION) for cls in events))


def registry_text(schema: Json) -> str:
    """A schema's text as registered: compact JSON, keys sorted.

    Apicurio Registry 3.0 tells a schema's type from its text and takes none for an Avro schema with a
    string "{}" in it (conf_json's default); the same string written with a JSON escape is the same
    schema to every JSON parser, and Apicurio then sees Avro.
    """
    return json.dumps(schema, separators=(",", ":"), sort_keys=True).replace('"{}"', '"\\u007b}"')


def _define_once(schema: Json, defined: dict[str, Json]) -> Json:
    """``schema`` with every named type already defined in the union replaced by its full name."""
    if isinstance(schema, list):
        return [_define_once(item, defined) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        name = str(schema["name"])
        full = name if "." in name else f"{schema.get('namespace', NAMESPACE)}.{name}"
        if full in defined:
            if _canonical(defined[full]) != _canonical(schema):
                raise ValueError(f"{full} is defined twice on one topic, differently")
            return full
        defined[full] = schema
        if kind == "record":
            fields = [{**field, "type": _define_once(field["type"], defined)} for field in schema["fields"]]
            return {**schema, "fields": fields}
        return schema
    if kind == "array":
        return {**schema, "items": _define_once(schema["items"], defined)}
    if kind == "map":
        return {**schema, "values": _define_once(schema["values"], defined)}
    return schema


def _canonical(schema: Json) -> str:
    return str(to_parsing_canonical_form(schema))


def branches_of(text: str) -> tuple[Branch, ...]:
    """The (event, version) of each branch of a union registered by any Tock release.

    A branch is matched to the frozen version of its event with the same parsing canonical form
    (defaults and docs aside, the same binary encoding); of equal forms, the newest version.
    """
    schema = json.loads(text)
    if not isinstance(schema, list):
        raise UnknownSchemaId("the schema is not a union of Tock events")
    found: list[Branch] = []
    for branch in expand_schema(schema):
        if not isinstance(branch, dict) or branch.get("type") != "record":
            raise UnknownSchemaId("a branch of the union is not a record")
        name = str(branch["name"]).rsplit(".", 1)[-1]
        version = _versions_by_form(name).get(_standalone_form(branch))
        if version is None:
            raise UnknownSchemaId(f"branch {name} matches no frozen version of that event")
        found.append((name, version))
    return tuple(found)


@cache
def _versions_by_form(name: str) -> dict[str, int]:
    forms: dict[str, int] = {}
    for version in frozen_versions(name):  # ascending: the newest of equal forms wins
        schema = frozen_schema(name, version)
        if schema is not None:
            forms[_standalone_form(expand_schema(schema))] = version
    return forms


def _standalone_form(expanded: Json) -> str:
    """The parsing canonical form of a fully expanded record, each named type defined once."""
    return hashlib.sha256(_canonical(_define_once(expanded, {})).encode()).hexdigest()


class SchemaIds:
    """The ids this process knows: a topic's writer id, and each id's branches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.registry: Registry | None = None
        self._writers: dict[str, int] = {}  # real topic name -> id of this release's union
        self._branches: dict[int, tuple[Branch, ...]] = {}

    def use(self, registry: Registry | None) -> None:
        """Write in the wire format through ``registry`` (None: the self-describing frame)."""
        self.registry = registry

    def writer(self, topic: str, logical: str) -> tuple[int, TopicUnion]:
        """The schema id records of ``topic`` are written with, registering the union if new."""
        union = topic_union(logical)
        known = self._writers.get(topic)
        if known is not None:
            return known, union
        registry = self._registry()
        schema_id = registry.register(subject(topic), union.text)
        with self._lock:
            self._writers[topic] = schema_id
            self._branches[schema_id] = union.branches
        return schema_id, union

    def branches(self, schema_id: int) -> tuple[Branch, ...]:
        known = self._branches.get(schema_id)
        if known is not None:
            return known
        registry = self.registry
        if registry is None:
            raise UnknownSchemaId(f"schema id {schema_id}: no schema registry is configured "
                                  "(TOCK_SCHEMA_REGISTRY_URL)")
        found = branches_of(registry.schema(schema_id))
        with self._lock:
            self._branches[schema_id] = found
        return found

    def exported(self) -> str:
        """The writer ids known, for a child process of the same release (TOCK_SCHEMA_IDS)."""
        with self._lock:
            return json.dumps({topic: [schema_id, topic_union_key(self._branches[schema_id])]
                               for topic, schema_id in sorted(self._writers.items())}, separators=(",", ":"))

    def imported(self, text: str, logical_of: dict[str, str]) -> int:
        """Learn writer ids a parent exported; an id of another release's union is left out. How many."""
        try:
            given = json.loads(text)
        except ValueError:
            return 0
        learned = 0
        for topic, pair in given.items() if isinstance(given, dict) else ():
            logical = logical_of.get(topic)
            if logical is None or not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)):
                continue
            union = topic_union(logical)
            if pair[1] == topic_union_key(union.branches):
                with self._lock:
                    self._writers[topic] = pair[0]
                    self._branches[pair[0]] = union.branches
                learned += 1
        return learned

    def _registry(self) -> Registry:
        if self.registry is None:
            raise UnknownSchemaId("no schema registry is configured (TOCK_SCHEMA_REGISTRY_URL)")
        return self.registry


def topic_union_key(branches: tuple[Branch, ...]) -> str:
    """A short name of a union's branches (event@version, ...), to tell releases apart."""
    return hashlib.sha256(",".join(f"{name}@{version}" for name, version in branches).encode()).hexdigest()[:16]


IDS = SchemaIds()  # the process's table: one registry per deployment
