"""Connections from URIs and JSON, as Airflow reads them, and back."""

from __future__ import annotations

import json

import pytest

from tock import BaseHook, Connection
from tock.connections import parse_uri


@pytest.mark.parametrize(("uri", "expected"), [
    ("postgres://etl:pw@db.example:5432/warehouse",
     {"conn_type": "postgres", "login": "etl", "password": "pw", "host": "db.example", "port": 5432,
      "schema": "warehouse", "extra": None}),
    ("postgresql://db", {"conn_type": "postgres", "host": "db", "login": None, "password": None, "port": None,
                         "schema": None, "extra": None}),
    ("google-cloud-platform://?project=p1&key_path=%2Fkeys%2Fk.json",
     {"conn_type": "google_cloud_platform", "host": None, "extra": json.dumps({"project": "p1",
                                                                                "key_path": "/keys/k.json"})}),
    ("mysql://us%40er:p%40ss%3Aw%2Ford@h:3306/d%2Fb",
     {"login": "us@er", "password": "p@ss:w/ord", "host": "h", "port": 3306, "schema": "d/b"}),
    ("http://:secret-only@api.example", {"login": None, "password": "secret-only", "host": "api.example"}),
    ('aws://?__extra__=%7B%22region%22%3A+%22eu%22%2C+%22retries%22%3A+3%7D',
     {"conn_type": "aws", "extra": '{"region": "eu", "retries": 3}'}),
])
def test_a_uri_reads_as_airflow_reads_it(uri, expected):
    fields = parse_uri(uri)
    assert {name: fields[name] for name in expected} == expected


def test_a_connection_given_by_uri_has_the_uris_fields_and_extra_as_a_dict():
    connection = Connection(conn_id="db", uri="postgres://etl:pw@db:5432/dw?sslmode=require&timeout=5")
    assert (connection.conn_type, connection.host, connection.port, connection.schema) == ("postgres", "db", 5432, "dw")
    assert connection.extra_dejson == {"sslmode": "require", "timeout": "5"}


@pytest.mark.parametrize("connection", [
    Connection(conn_id="a", conn_type="postgres", host="db", login="etl", password="p@ss/w:rd", schema="dw",
               port=5432),
    Connection(conn_id="b", conn_type="http", host="api.example", extra={"timeout": 5, "verify": False}),
    Connection(conn_id="c", conn_type="aws", extra={"region": "eu-west-1"}),
    Connection(conn_id="d", conn_type="google_cloud_platform", password="x y"),
])
def test_get_uri_reads_back_to_the_same_connection(connection):
    assert Connection.from_uri(connection.get_uri(), connection.conn_id) == connection


def test_the_json_form_reads_back_and_takes_extra_as_an_object_or_its_text():
    connection = Connection.from_json('{"conn_type": "http", "host": "h", "port": "8080", "password": "pw", '
                                      '"extra": {"timeout": 5}}', "api")
    assert (connection.port, connection.extra_dejson) == (8080, {"timeout": 5})
    assert Connection.from_json(connection.to_json(), "api") == connection
    assert Connection.from_json('{"conn_type": "http", "extra": "{\\"a\\": 1}"}', "x").extra_dejson == {"a": 1}


@pytest.mark.parametrize("text", ['["not", "an", "object"]', '{"conn_type": "http", "hots": "typo"}'])
def test_json_that_is_not_a_connection_is_refused_with_the_reason(text):
    with pytest.raises(ValueError, match="connection x"):
        Connection.from_json(text, "x")


def test_parse_takes_either_form():
    assert Connection.parse('  {"conn_type": "http", "host": "h"}', "x").host == "h"
    assert Connection.parse("http://h", "x").host == "h"


def test_a_uri_and_fields_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        Connection(conn_id="x", uri="http://h", host="other")


def test_a_uri_without_a_scheme_is_refused_without_showing_its_password():
    with pytest.raises(ValueError) as raised:
        parse_uri("etl:hunter22@db")
    assert "hunter22" not in str(raised.value)


def test_repr_never_shows_the_password():
    assert "hunter22" not in repr(Connection(conn_id="x", conn_type="http", password="hunter22"))


def test_extra_that_is_not_a_json_object_reads_as_empty():
    assert Connection(conn_id="x", extra="not json").extra_dejson == {}


def test_base_hook_and_connection_get_name_a_missing_conn_id():
    from tock import AirflowNotFoundException
    from tock.secrets import SecretsChain, install

    install(SecretsChain(backends=()))
    with pytest.raises(AirflowNotFoundException, match="The conn_id `nowhere` isn't defined"):
        BaseHook.get_connection("nowhere")
    with pytest.raises(KeyError):
        Connection.get("nowhere")
