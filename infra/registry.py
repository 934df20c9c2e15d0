"""A schema registry over its Confluent-compatible REST API, and attaching it to the codec.

The codec (schemas/codec.py, schemas/wire.py) asks a registry for two things: the id of a topic's
union schema (registered once per topic and release, its subject's compatibility set to BACKWARD
first, so the registry refuses a release that could not read the records before it) and the schema
of an id it meets in a record. Both are retried while the registry is unreachable or answers 5xx,
up to ``TOCK_SCHEMA_REGISTRY_TIMEOUT`` seconds, like a call to a broker that is restarting; a 4xx is
an error at once, naming what the registry said.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from infra.settings import Settings
from infra.topics import SPECS, topic_name
from schemas.wire import IDS, Registry, UnknownSchemaId, topic_events

log = logging.getLogger("tock.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
IDS_VARIABLE = "TOCK_SCHEMA_IDS"  # settings.schema_ids: the writer ids a parent knew, for its children


class RegistryError(RuntimeError):
    """The registry refused a request, or did not answer in time; the message says which and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a refusal (None: no answer)


class IncompatibleSchema(RegistryError):
    """The registry refused a topic's schema as incompatible with the versions before it."""


class HttpRegistry(Registry):
    """The Confluent-compatible API at ``url`` (Apicurio's is ``.../apis/ccompat/v7``)."""

    def __init__(self, url: str, *, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._configured: set[str] = set()
        self._lock = threading.Lock()

    def register(self, subject: str, schema: str) -> int:
        with self._lock:
            if subject not in self._configured:
                self._configure(subject)
                self._configured.add(subject)
        answer = self._call("POST", f"/subjects/{subject}/versions", {"schema": schema, "schemaType": "AVRO"})
        schema_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(schema_id, int):
            raise RegistryError(f"the registry at {self.url} answered a registration of {subject} without an id")
        log.debug("schema of %s: id %d", subject, schema_id)
        return schema_id

    def _configure(self, subject: str) -> None:
        """The subject's compatibility: BACKWARD. Two processes setting it at once for a new subject race to
        create the rule, and the registry refuses the second with HTTP 409 (Apicurio: "A rule named
        'COMPATIBILITY' already exists"); set again, it is an update of the rule the other created."""
        try:
            self._call("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
        except RegistryError as error:
            if error.status != 409:
                raise
            log.info("compatibility of %s set by another process at the same moment: setting it again", subject)
            self._call("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})

    def schema(self, schema_id: int) -> str:
        try:
            answer = self._call("GET", f"/schemas/ids/{schema_id}", None)
        except RegistryError as error:
            if error.status == 404:  # a record naming an id no release registered: not a Tock record
                raise UnknownSchemaId(f"the schema registry has no schema id {schema_id}") from None
            raise
        text = answer.get("schema") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise RegistryError(f"the registry at {self.url} has no schema text for id {schema_id}")
        return text

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        deadline = time.monotonic() + self.timeout
        delay = 0.2
        while True:
            try:
                return self._once(method, path, body)
            except _Unavailable as error:
                if time.monotonic() + delay > deadline:
                    raise RegistryError(f"the schema registry at {self.url} did not answer {method} {path} "
                                        f"within {self.timeout:g} s: {error}") from None
                log.warning("schema registry at %s unavailable (%s); retrying in %.1f s", self.url, error, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            if error.code >= 500:
                raise _Unavailable(f"HTTP {error.code}: {detail}") from None
            kind = IncompatibleSchema if error.code == 409 else RegistryError
            raise kind(f"the schema registry at {self.url} refused {method} {path}: HTTP {error.code}: {detail}",
                       error.code) from None
        except (urllib.error.URLError, OSError) as error:
            raise _Unavailable(str(getattr(error, "reason", error))) from None


class _Unavailable(Exception):
    pass


def attach(settings: Settings) -> None:
    """Point the process's codec at the registry ``settings`` name (once; none: the self-describing
    frame), and learn the writer ids a parent process passed down in ``TOCK_SCHEMA_IDS``."""
    url = settings.schema_registry_url
    if url is None or IDS.registry is not None:
        return
    IDS.use(HttpRegistry(url, timeout=settings.schema_registry_timeout))
    if settings.schema_ids:
        names = {topic_name(settings.topic_prefix, spec.logical): spec.logical for spec in SPECS}
        IDS.imported(settings.schema_ids, names)


def register_all(settings: Settings) -> dict[str, int]:
    """Register every event topic's schema now (``tock topics create`` does), by real topic name."""
    attach(settings)
    if IDS.registry is None:
        return {}
    found: dict[str, int] = {}
    for spec in SPECS:
        if not topic_events(spec.logical):  # dead letters and snapshots hold no events
            continue
        topic = topic_name(settings.topic_prefix, spec.logical)
        found[topic], _union = IDS.writer(topic, spec.logical)
    return found


def exported_ids(settings: Settings) -> dict[str, str]:
    """The environment a child process of this release is given: the writer ids of every event topic."""
    if IDS.registry is None:
        return {}
    register_all(settings)
    return {IDS_VARIABLE: IDS.exported()}

