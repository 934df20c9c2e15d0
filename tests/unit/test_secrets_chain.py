"""The secrets chain: backends in order, first hit wins; Variable and Connection through it; what is
masked once read; the accesses recorded (names and backends, never values)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from infra.secrets.env import EnvironmentSecrets
from tock import AirflowRuntimeError, Connection, Variable, mask_secret
from tock.secrets import NoWritableBackend, SecretsChain, accesses, install, masker
from tock.secrets.masking import Masker


class DictSecrets:
    """A backend over two dicts: a stand-in for a store in tests of the chain (not the code under test)."""

    def __init__(self, name: str, variables: dict[str, str] | None = None,
                 connections: dict[str, str] | None = None) -> None:
        self.name, self.variables, self.connections = name, dict(variables or {}), dict(connections or {})

    def get_variable(self, key: str) -> str | None:
        return self.variables.get(key)

    def get_connection(self, conn_id: str) -> str | None:
        return self.connections.get(conn_id)


class WritableDictSecrets(DictSecrets):
    def set_variable(self, key: str, value: str, description: str | None) -> None:
        self.variables[key] = value

    def delete_variable(self, key: str) -> None:
        self.variables.pop(key, None)


@pytest.fixture
def chain() -> Iterator[SecretsChain]:
    environment = EnvironmentSecrets({"TOCK_VAR_REGION": "eu-west-1", "TOCK_VAR_DB_PASSWORD": "env-pass-123",
                                      "TOCK_CONN_WAREHOUSE": "postgres://etl:wh-pass-456@db:5432/dw",
                                      "TOCK_CONN_API": json.dumps({"conn_type": "http", "host": "api",
                                                                   "extra": {"api_key": "key-789-xyz"}}),
                                      "PATH": "/bin", "TOCK_HOME": "/not/a/secret"})
    store = WritableDictSecrets("store", {"region": "us-east-1", "owner": "data-team"},
                                {"warehouse": "mysql://other@elsewhere", "queue": "redis://:q-pass-000@redis"})
    chain = SecretsChain(backends=[environment, store], masker=Masker())
    install(chain)
    yield chain
    install(SecretsChain(backends=()))


def test_the_first_backend_that_has_a_name_answers(chain):
    assert Variable.get("region") == "eu-west-1"  # env before store
    assert Variable.get("owner") == "data-team"  # only in the store
    assert Connection.get("warehouse").conn_type == "postgres"
    assert Connection.get("queue").password == "q-pass-000"
    assert accesses() == [("variable", "region", "env"), ("variable", "owner", "store"),
                          ("connection", "warehouse", "env"), ("connection", "queue", "store")]


def test_environment_names_are_upper_cased_and_other_variables_are_not_secrets():
    environment = EnvironmentSecrets({"TOCK_VAR_MY_KEY": "v", "TOCK_HOME": "/h", "PATH": "/bin"})
    assert (environment.get_variable("my_key"), environment.get_variable("HOME")) == ("v", None)


def test_a_missing_variable_raises_airflows_error_a_key_error_or_gives_the_default(chain):
    with pytest.raises(AirflowRuntimeError, match="Variable nowhere not found"):
        Variable.get("nowhere")
    with pytest.raises(KeyError):
        Variable.get("nowhere")
    assert Variable.get("nowhere", default=None) is None
    assert Variable.get("nowhere", "fallback") == "fallback"
    assert accesses()[-1] == ("variable", "nowhere", "none")


def test_json_values_are_read_and_written_as_json(chain):
    Variable.set("config", {"retries": 3, "tags": ["a"]}, serialize_json=True)
    assert Variable.get("config", deserialize_json=True) == {"retries": 3, "tags": ["a"]}
    assert json.loads(Variable.get("config")) == {"retries": 3, "tags": ["a"]}


def test_set_and_delete_write_to_the_writable_backend(chain):
    Variable.set("fresh", 42)
    assert Variable.get("fresh") == "42"
    Variable.delete("fresh")
    assert Variable.get("fresh", default="gone") == "gone"


def test_set_without_a_writable_backend_says_why():
    install(SecretsChain(backends=[EnvironmentSecrets({})]))
    with pytest.raises(NoWritableBackend, match="Tock's store"):
        Variable.set("x", "y")
    install(SecretsChain(backends=()))


def test_a_sensitive_variable_is_masked_once_read_and_a_plain_one_is_not(chain):
    Variable.get("db_password")
    Variable.get("region")
    assert chain.masker.mask("env-pass-123 in eu-west-1") == "*** in eu-west-1"


def test_a_connections_password_and_sensitive_extra_are_masked_once_read(chain):
    Connection.get("warehouse")
    Connection.get("api")
    assert chain.masker.mask("wh-pass-456 key-789-xyz api") == "*** *** api"


def test_mask_secret_registers_with_the_installed_chains_masker(chain):
    mask_secret("handed-over-token")
    mask_secret("named-but-plain", name="region")  # a name that is not sensitive: not masked
    mask_secret("named-and-secret", name="client_secret")
    assert masker().mask("handed-over-token named-but-plain named-and-secret") == "*** named-but-plain ***"


def test_a_variables_repr_never_shows_its_value():
    assert "s3cr3t" not in repr(Variable("token", "s3cr3t"))
