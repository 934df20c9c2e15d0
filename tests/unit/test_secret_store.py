"""Tock's store of variables and connections: the settings that configure it, encryption, the fold of
tock.secrets, and what a change appends (nothing when it changes nothing)."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet

from infra.secrets import manage
from infra.secrets.keys import FernetKeyMissing, NotDecrypted, decrypt, encrypt, fernet_of
from infra.secrets.kube import secret_name
from infra.secrets.store import (
    StoredSecrets,
    connection_fields,
    connection_set,
    evolve_store,
    fold_store,
    variable_value,
)
from infra.settings import SettingsError, load_settings
from schemas import ConnectionDeleted, ConnectionSet, VariableDeleted, VariableSet, encode

KEY = Fernet.generate_key().decode()
FERNET = Fernet(KEY)


def test_tock_var_and_tock_conn_variables_pass_the_unknown_setting_check():
    settings = load_settings({"TOCK_VAR_REGION": "eu", "TOCK_CONN_DB": "postgres://h", "TOCK_FERNET_KEY": KEY,
                              "TOCK_SECRETS_KUBE_NAMESPACE": "tock-secrets"})
    assert (settings.fernet_key, settings.secrets_kube_namespace) == (KEY, "tock-secrets")


@pytest.mark.parametrize("name", ["TOCK_VARS_REGION", "TOCK_VAR", "TOCK_CONNECTION_DB", "TOCK_SECRET_FILE"])
def test_names_merely_like_them_are_still_unknown(name):
    with pytest.raises(SettingsError, match=name):
        load_settings({name: "x"})


def test_a_bad_fernet_key_is_refused_with_the_reason():
    with pytest.raises(FernetKeyMissing, match="TOCK_FERNET_KEY is not valid"):
        fernet_of(load_settings({"TOCK_FERNET_KEY": "short"}))


def test_encryption_round_trips_and_another_key_does_not_decrypt():
    token = encrypt(FERNET, "pässword ✓")
    assert decrypt(FERNET, token, "variable x") == "pässword ✓"
    with pytest.raises(NotDecrypted, match="variable x"):
        decrypt(Fernet(Fernet.generate_key()), token, "variable x")


def test_a_records_bytes_never_hold_the_value_in_clear():
    variable = manage.set_variable(StoredSecrets(), FERNET, "db_password", "clear-value-111", "the db",
                                   by="cli", at=1.0)
    connection = manage.set_connection(StoredSecrets(), FERNET, "wh", {
        "conn_type": "postgres", "host": "db-host-222", "login": "etl-login-333", "password": "clear-pass-444",
        "extra": {"api_key": "extra-key-555"}}, by="cli", at=1.0)
    raw = encode(variable[0]) + encode(connection[0])
    for clear in (b"clear-value-111", b"db-host-222", b"etl-login-333", b"clear-pass-444", b"extra-key-555"):
        assert clear not in raw
    assert b"postgres" in raw and b"db_password" in raw  # a type and a name are not secrets


def test_the_fold_keeps_the_latest_of_each_name_and_forgets_deleted_ones():
    events = [VariableSet(key="a", value_encrypted=encrypt(FERNET, "1"), at=1.0),
              VariableSet(key="a", value_encrypted=encrypt(FERNET, "2"), at=2.0),
              VariableSet(key="b", value_encrypted=encrypt(FERNET, "3"), at=3.0),
              VariableDeleted(key="b", at=4.0),
              connection_set(FERNET, "c", {"conn_type": "http", "host": "h", "description": "d"}, "cli", 5.0),
              connection_set(FERNET, "gone", {"conn_type": "http"}, "cli", 6.0),
              ConnectionDeleted(conn_id="gone", at=7.0)]
    state = fold_store(events)
    assert {key: variable_value(FERNET, stored) for key, stored in state.variables.items()} == {"a": "2"}
    assert {conn_id: connection_fields(FERNET, stored) for conn_id, stored in state.connections.items()} == {
        "c": {"conn_type": "http", "host": "h", "description": "d"}}


def test_folding_in_pieces_equals_folding_at_once():
    events = [VariableSet(key=f"k{index % 3}", value_encrypted=str(index), at=float(index)) for index in range(9)]
    pieces = fold_store(events[:4])
    for event in events[4:]:
        evolve_store(pieces, event)
    assert pieces == fold_store(events)


def test_setting_what_the_store_holds_appends_nothing():
    first = manage.set_variable(StoredSecrets(), FERNET, "region", "eu", None, by="cli", at=1.0)
    state = fold_store(first)
    assert manage.set_variable(state, FERNET, "region", "eu", None, by="cli", at=2.0) == []
    assert len(manage.set_variable(state, FERNET, "region", "us", None, by="cli", at=2.0)) == 1
    assert len(manage.set_variable(state, FERNET, "region", "eu", "now described", by="cli", at=2.0)) == 1


def test_adding_the_same_connection_again_appends_nothing():
    fields = {"conn_type": "http", "host": "h", "port": 80, "password": "pw", "extra": {"a": 1}}
    state = fold_store(manage.set_connection(StoredSecrets(), FERNET, "api", fields, by="cli", at=1.0))
    assert manage.set_connection(state, FERNET, "api", dict(fields), by="cli", at=2.0) == []
    assert isinstance(manage.set_connection(state, FERNET, "api", {**fields, "port": 81}, by="cli", at=2.0)[0],
                      ConnectionSet)


def test_deleting_what_is_not_there_appends_nothing():
    assert manage.delete_variable(StoredSecrets(), "x", by="cli", at=1.0) == []
    assert manage.delete_connection(StoredSecrets(), "x", by="cli", at=1.0) == []


def test_a_shown_connection_hides_its_password():
    assert manage.redacted({"host": "h", "password": "pw"}) == {"host": "h", "password": "***"}
    assert json.dumps(manage.redacted({"host": "h"})) == '{"host": "h"}'


@pytest.mark.parametrize(("kind", "name", "expected"), [
    ("variable", "my_api_key", "tock-variable-my-api-key"),
    ("connection", "Warehouse.EU", "tock-connection-warehouse.eu"),
    ("variable", "__", None),
])
def test_kubernetes_secret_names_follow_the_documented_rule(kind, name, expected):
    assert secret_name(kind, name) == expected


def test_a_runner_inherits_tock_var_and_tock_conn_but_user_code_never_does():
    from infra.executors.requests import TryRequest
    from infra.task_environment import TaskEnvironment

    environ = {"PATH": "/bin", "TOCK_VAR_REGION": "eu", "TOCK_CONN_DB": "postgres://h", "TOCK_API_TOKEN": "t"}
    environment = TaskEnvironment.parse("PATH,TOCK_*")
    assert environment.for_runner(environ) == {"PATH": "/bin", "TOCK_VAR_REGION": "eu", "TOCK_CONN_DB": "postgres://h"}
    user_code = environment.for_try(environ, TryRequest("etl", "r1", "t1", 1, "/dags/etl.py"))
    assert not [name for name in user_code if name.startswith("TOCK_")]


def test_records_of_tock_secrets_are_keyed_by_kind_and_name_for_compaction():
    from infra.log import routing_key

    assert routing_key(VariableSet(key="region", value_encrypted="x", at=1.0)) == ("variable/region",) * 2
    assert routing_key(VariableDeleted(key="region", at=2.0)) == ("variable/region",) * 2
    assert routing_key(ConnectionDeleted(conn_id="region", at=2.0)) == ("connection/region",) * 2
