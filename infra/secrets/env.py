"""Variables and connections from environment variables: ``TOCK_VAR_<KEY>`` and ``TOCK_CONN_<CONN_ID>``
(the key or id upper-cased, as Airflow's ``AIRFLOW_VAR_`` / ``AIRFLOW_CONN_``); a connection is a URI
or its JSON form. The environment is read once, when the backend is built."""

from __future__ import annotations

from collections.abc import Mapping

from infra.settings import SECRET_ENV_PREFIXES

VARIABLE_PREFIX, CONNECTION_PREFIX = SECRET_ENV_PREFIXES


class EnvironmentSecrets:
    name = "env"

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._values = {key: value for key, value in environ.items() if key.startswith(SECRET_ENV_PREFIXES)}

    def get_variable(self, key: str) -> str | None:
        return self._values.get(VARIABLE_PREFIX + key.upper())

    def get_connection(self, conn_id: str) -> str | None:
        return self._values.get(CONNECTION_PREFIX + conn_id.upper())
