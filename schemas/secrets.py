"""Variables and connections of Tock's own store (topic ``tock.secrets``, compacted), and the audit of
their use (``SecretAccessed`` on tock.events).

A value never enters Kafka in clear text: ``VariableSet.value_encrypted`` and
``ConnectionSet.connection_encrypted`` are Fernet tokens (key ``TOCK_FERNET_KEY``, see
infra/secrets/keys.py). Compaction keeps the latest record of each variable and connection (keys
``variable/<key>`` and ``connection/<conn_id>``); a deletion is a record too, so it wins over the set
before it and says who deleted what.
"""

from __future__ import annotations

from schemas.declare import EVENTS, SECRETS, EventBase, event
from schemas.routing import BY_CONNECTION, BY_DAG, BY_VARIABLE


@event(SECRETS, route=BY_VARIABLE)
class VariableSet(EventBase):
    """Variable ``key`` has this value (a Fernet token of its text; JSON when set with serialize_json)."""

    key: str
    value_encrypted: str
    description: str = ""
    set_by: str = ""
    at: float


@event(SECRETS, route=BY_VARIABLE)
class VariableDeleted(EventBase):
    """Variable ``key`` no longer exists in Tock's store."""

    key: str
    deleted_by: str = ""
    at: float


@event(SECRETS, route=BY_CONNECTION)
class ConnectionSet(EventBase):
    """Connection ``conn_id`` is this one: a Fernet token of its JSON form (conn_type, host, login,
    password, schema, port, extra); only its id, type and description are in clear."""

    conn_id: str
    conn_type: str = ""
    description: str = ""
    connection_encrypted: str
    set_by: str = ""
    at: float


@event(SECRETS, route=BY_CONNECTION)
class ConnectionDeleted(EventBase):
    """Connection ``conn_id`` no longer exists in Tock's store."""

    conn_id: str
    deleted_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG)
class SecretAccessed(EventBase):
    """A try read a variable or a connection: which one (``kind`` "variable" or "connection",
    ``name``), from which backend ("env", "file", "kubernetes", "store"; "none" when no backend had
    it), never its value. Written by the try's runner with its outcome; recorded, changes nothing."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    map_index: int = -1
    kind: str
    name: str
    backend: str
    at: float
