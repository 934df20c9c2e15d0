"""Tock's store of variables and connections on the real broker: `tock variables|connections` through
the log, idempotent; the raw records of tock.secrets never hold a value in clear; a task process's
chain reads the store to its end and writes to it."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from infra.log import replay
from infra.secrets import secrets_backends
from infra.topics import TopicNames
from schemas import SECRETS, ConnectionSet, VariableSet
from tests.scenarios.scheduler_support import environment
from tock import Connection, Variable
from tock.secrets import SecretsChain, accesses, install
from tock.secrets.masking import Masker
from tock_cli import app as cli

pytestmark = pytest.mark.integration
CLEAR = ("s3cret-value-1", "wh-pass-2", "db-host-3", "second-value-4")


@pytest.fixture
def settings(make_settings):
    from confluent_kafka.admin import AdminClient

    from infra.topics import ensure_topics

    settings = make_settings(fernet_key=Fernet.generate_key().decode())
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    return settings


def tock(settings, *args: str):
    result = CliRunner().invoke(cli, list(args), env=environment(settings))
    return result


def ok(settings, *args: str) -> str:
    result = tock(settings, *args)
    assert result.exit_code == 0, result.output
    return result.output


def raw_values(settings, logical: str = SECRETS) -> list[bytes]:
    """Every record of a topic (tock.secrets by default) as the broker holds it: key=value, not decoded."""
    topic = TopicNames(settings.topic_prefix)[logical]
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    partitions = range(settings.partitions)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions])
    values, ended = [], set()
    try:
        while len(ended) < settings.partitions:
            for message in consumer.consume(100, 1.0):
                if message.error():
                    ended.add(message.partition())
                else:
                    values.append((message.key() or b"") + b"=" + (message.value() or b""))
    finally:
        consumer.close()
    return values


def test_the_cli_sets_once_reads_back_and_never_writes_clear_text(settings):
    ok(settings, "variables", "set", "db_password", CLEAR[0], "--description", "the db's")
    assert "unchanged" in ok(settings, "variables", "set", "db_password", CLEAR[0], "--description", "the db's")
    ok(settings, "connections", "add", "warehouse", "--conn-uri", f"postgres://etl:{CLEAR[1]}@{CLEAR[2]}:5432/dw")
    assert "unchanged" in ok(settings, "connections", "add", "warehouse", "--conn-uri",
                             f"postgres://etl:{CLEAR[1]}@{CLEAR[2]}:5432/dw")
    refused = tock(settings, "connections", "add", "warehouse", "--conn-uri", "mysql://other")
    assert refused.exit_code == 1 and "--replace" in refused.output

    assert ok(settings, "variables", "get", "db_password").strip() == CLEAR[0]
    listed = json.loads(ok(settings, "variables", "list", "--json"))
    assert [(row["key"], row["description"]) for row in listed] == [("db_password", "the db's")]
    shown = json.loads(ok(settings, "connections", "get", "warehouse"))
    assert (shown["password"], shown["host"], shown["port"]) == ("***", CLEAR[2], 5432)
    assert json.loads(ok(settings, "connections", "get", "warehouse", "--reveal"))["password"] == CLEAR[1]

    events = [record.event for record in replay(settings, SECRETS)]
    # One of each; they are routed to their names' partitions, so the log orders them only per partition.
    assert sorted(type(event).__name__ for event in events if isinstance(event, VariableSet | ConnectionSet)) == [
        "ConnectionSet", "VariableSet"]
    raw = raw_values(settings)
    assert len(raw) == 2 and not [clear for clear in CLEAR if any(clear.encode() in value for value in raw)]

    ok(settings, "variables", "delete", "db_password")
    assert tock(settings, "variables", "get", "db_password").exit_code == 1
    assert tock(settings, "variables", "delete", "db_password").exit_code == 1
    ok(settings, "connections", "delete", "warehouse")
    assert json.loads(ok(settings, "connections", "list", "--json")) == []


def test_a_task_process_reads_the_store_to_its_end_and_writes_through_it(settings):
    ok(settings, "variables", "set", "region", "eu-west-1")
    ok(settings, "connections", "add", "api", "--conn-json",
       json.dumps({"conn_type": "http", "host": "api.example", "password": CLEAR[1], "extra": {"timeout": 5}}))
    chain = SecretsChain(secrets_backends(settings, {"TOCK_VAR_REGION": "from-env"}), masker=Masker())
    install(chain)
    try:
        assert Variable.get("region") == "from-env"  # the environment comes first
        connection = Connection.get("api")
        assert (connection.host, connection.password, connection.extra_dejson) == ("api.example", CLEAR[1],
                                                                                  {"timeout": 5})
        assert chain.masker.mask(f"pw={CLEAR[1]}") == "pw=***"
        Variable.set("api_token", CLEAR[3], description="set by a task")
        assert Variable.get("api_token") == CLEAR[3]  # this process's cache has it at once
        assert accesses() == [("variable", "region", "env"), ("connection", "api", "store"),
                              ("variable", "api_token", "store")]
        install(SecretsChain(secrets_backends(settings, {})))  # another process: reads the store anew
        assert (Variable.get("region"), Variable.get("api_token")) == ("eu-west-1", CLEAR[3])
    finally:
        install(SecretsChain(backends=()))
    assert CLEAR[3] in ok(settings, "variables", "get", "api_token")
    assert not any(CLEAR[3].encode() in value for value in raw_values(settings))


def test_without_a_fernet_key_the_cli_lists_names_and_says_what_to_do_for_values(make_settings, settings):
    ok(settings, "variables", "set", "region", "eu")
    keyless = make_settings()  # the same topics, no key
    assert [row["key"] for row in json.loads(ok(keyless, "variables", "list", "--json"))] == ["region"]
    result = tock(keyless, "variables", "get", "region")
    assert result.exit_code == 1 and "TOCK_FERNET_KEY" in result.output
