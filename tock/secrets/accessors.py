"""``var`` and ``conn`` as templates see them (Airflow's names): ``{{ var.value.region }}``,
``{{ var.json.settings.depth }}``, ``{{ var.value.get('region', 'eu') }}``, ``{{ conn.warehouse.host }}``,
``{{ conn.get('warehouse').login }}``. Each read goes through the installed secrets chain, so it is
masked and audited as ``Variable.get`` and ``Connection.get`` are."""

from __future__ import annotations

from typing import Any

from tock.variables import NOTSET


class _Variables:
    def __init__(self, deserialize_json: bool) -> None:
        self._json = deserialize_json

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        return self.get(key)

    def get(self, key: str, default: Any = NOTSET) -> Any:
        from tock.variables import Variable

        return Variable.get(key, default=default, deserialize_json=self._json)


class VariableAccessor:
    """``var``: ``var.value.NAME`` (text) and ``var.json.NAME`` (parsed)."""

    def __init__(self) -> None:
        self.value, self.json = _Variables(False), _Variables(True)


class ConnectionAccessor:
    """``conn``: ``conn.ID`` and ``conn.get(ID)``, a Connection."""

    def __getattr__(self, conn_id: str) -> Any:
        if conn_id.startswith("__"):
            raise AttributeError(conn_id)
        return self.get(conn_id)

    def get(self, conn_id: str, default: Any = NOTSET) -> Any:
        from tock.connections import Connection
        from tock.secrets.errors import AirflowNotFoundException

        try:
            return Connection.get(conn_id)
        except AirflowNotFoundException:
            if default is NOTSET:
                raise
            return default
