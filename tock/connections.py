"""Connections: how a task reaches an outside system (host, login, password, extra), as Airflow's
``airflow.sdk.Connection`` and ``BaseHook.get_connection``.

A connection comes from the secrets chain (tock/secrets: environment, secrets file, Kubernetes
Secrets, Tock's store), first hit wins. Given as a URI it reads like Airflow's:
``conn-type://login:password@host:port/schema?extra_key=value`` (each part percent-encoded, the
scheme's ``-`` read as ``_``, ``postgresql`` as ``postgres``, ``__extra__=<json>`` for an extra
that is not flat text); given as JSON it is an object of the same fields (``extra`` an object or
its JSON text). Reading one registers its password, and the values of its extra under sensitive
keys, with the masker (tock/secrets/masking.py), and is recorded as an access.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from tock.secrets.errors import AirflowNotFoundException

FIELDS = ("conn_type", "description", "host", "login", "password", "schema", "port", "extra")
EXTRA_KEY = "__extra__"


class Connection:
    """A connection: ``Connection(conn_id="db", conn_type="postgres", host=...)``, or
    ``Connection(conn_id="db", uri="postgres://user:pw@host:5432/db")``."""

    def __init__(self, conn_id: str, conn_type: str | None = None, description: str | None = None,
                 host: str | None = None, login: str | None = None, password: str | None = None,
                 schema: str | None = None, port: int | None = None, extra: str | dict[str, Any] | None = None,
                 uri: str | None = None) -> None:
        self.conn_id = conn_id
        if uri is not None:
            if any(value is not None for value in (conn_type, host, login, password, schema, port, extra)):
                raise ValueError("give a connection's uri or its fields, not both")
            parsed = parse_uri(uri)
            conn_type, host, login, password = parsed["conn_type"], parsed["host"], parsed["login"], parsed["password"]
            schema, port, extra = parsed["schema"], parsed["port"], parsed["extra"]
        self.conn_type = conn_type
        self.description = description
        self.host = host
        self.login = login
        self.password = password
        self.schema = schema
        self.port = int(port) if port is not None else None
        self.extra = json.dumps(extra) if isinstance(extra, dict) else extra

    @property
    def extra_dejson(self) -> dict[str, Any]:
        """``extra`` as a dict ({} when empty or not a JSON object)."""
        if not self.extra:
            return {}
        try:
            value = json.loads(self.extra)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def get_uri(self) -> str:
        """The connection as a URI that :func:`parse_uri` reads back to the same fields."""
        scheme = (self.conn_type or "").replace("_", "-")
        auth = ""
        if self.login is not None or self.password is not None:
            auth = quote(self.login or "", safe="")
            auth += f":{quote(self.password, safe='')}" if self.password is not None else ""
            auth += "@"
        host = quote(self.host or "", safe="")
        port = f":{self.port}" if self.port is not None else ""
        path = f"/{quote(self.schema, safe='')}" if self.schema else ""
        return f"{scheme}://{auth}{host}{port}{path}{self._query()}"

    def _query(self) -> str:
        extra = self.extra_dejson
        if not self.extra:
            return ""
        if extra and all(isinstance(value, str) for value in extra.values()):
            return "?" + urlencode(extra)
        return "?" + urlencode({EXTRA_KEY: self.extra})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field that is set (``extra`` as an object when it is one)."""
        values: dict[str, Any] = {name: getattr(self, name) for name in FIELDS if getattr(self, name) is not None}
        if self.extra and self.extra_dejson:
            values["extra"] = self.extra_dejson
        return values

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, value: str, conn_id: str) -> Connection:
        """A connection from its JSON form (an object of :data:`FIELDS`)."""
        fields = json.loads(value)
        if not isinstance(fields, dict):
            raise ValueError(f"connection {conn_id}: JSON must be an object of {', '.join(FIELDS)}")
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"connection {conn_id}: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(conn_id=conn_id, **fields)

    @classmethod
    def from_uri(cls, uri: str, conn_id: str) -> Connection:
        return cls(conn_id=conn_id, uri=uri)

    @classmethod
    def parse(cls, text: str, conn_id: str) -> Connection:
        """From either form: JSON when it starts with ``{``, else a URI."""
        return cls.from_json(text, conn_id) if text.lstrip().startswith("{") else cls.from_uri(text, conn_id)

    @classmethod
    def get(cls, conn_id: str) -> Connection:
        """The connection ``conn_id`` from the installed secrets chain; AirflowNotFoundException if
        no backend has it."""
        from tock.secrets import current_chain

        found = current_chain().connection(conn_id)
        if found is None:
            raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")
        return found

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Connection):
            return NotImplemented
        return self.conn_id == other.conn_id and all(getattr(self, name) == getattr(other, name) for name in FIELDS)

    def __hash__(self) -> int:
        return hash(self.conn_id)

    def __repr__(self) -> str:  # never the password
        return f"Connection(conn_id={self.conn_id!r}, conn_type={self.conn_type!r}, host={self.host!r})"


def parse_uri(uri: str) -> dict[str, Any]:
    """The fields of a connection URI (see the module's docstring)."""
    parts = urlsplit(uri)
    if not parts.scheme or "://" not in uri:
        raise ValueError(f"not a connection URI (no scheme): {_redacted(uri)}")
    conn_type = "postgres" if parts.scheme == "postgresql" else parts.scheme.replace("-", "_")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    extra: str | None = query.pop(EXTRA_KEY, None) if EXTRA_KEY in query else (json.dumps(query) if query else None)
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError(f"connection URI {_redacted(uri)}: {error}") from None
    return {"conn_type": conn_type, "host": unquote(parts.hostname or "") or None,
            "login": unquote(parts.username) if parts.username else None,  # "://:pw@h": a password alone
            "password": unquote(parts.password) if parts.password is not None else None,
            "schema": unquote(parts.path[1:]) or None, "port": port, "extra": extra}


def _redacted(uri: str) -> str:
    return uri.split("@", 1)[-1] if "@" in uri else uri


class BaseHook:
    """Airflow's base of hooks; here only what finds a connection."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        """The connection ``conn_id`` (as :meth:`Connection.get`)."""
        return Connection.get(conn_id)
