"""``tock variables set|get|list|delete`` and ``tock connections add|get|list|delete``: Tock's own store of
variables and connections (tock.secrets, values encrypted with the Fernet key).

Each reads the store to its end first, so setting what is already there appends nothing (a second
``set`` of the same value leaves one record), and a deletion of what is not there fails (exit 1).
A connection's password is shown as ``***`` unless ``--reveal`` is given.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from tock_cli import settings_of
from tock_cli.appending import fail
from tock_cli.query_commands import JSON_OPTION, _show

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from infra.secrets.store import StoredSecrets
    from infra.settings import Settings

WRITER = "cli"
variables_app = typer.Typer(help="Variables of Tock's store (encrypted in the log).", no_args_is_help=True)
connections_app = typer.Typer(help="Connections of Tock's store (encrypted in the log).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(variables_app, name="variables")
    app.add_typer(connections_app, name="connections")


def _name(value: str) -> str:
    from infra.secrets.manage import KEY_PATTERN

    if not re.fullmatch(KEY_PATTERN, value):
        raise typer.BadParameter("1 to 250 letters, digits, '_', '.' or '-'")
    return value


@contextmanager
def _store(ctx: typer.Context, command: str, *,
           keyed: bool = True) -> Iterator[tuple[Settings, Fernet | None, StoredSecrets]]:
    """The settings, the Fernet key (``keyed``: lists and deletions need none, names are in clear) and the
    store read to its end; their failures exit 1 with the reason."""
    from confluent_kafka import KafkaException

    from infra.secrets.keys import FernetKeyMissing, NotDecrypted, fernet_of
    from infra.secrets.store import read_store

    settings = settings_of(ctx)
    try:
        yield settings, fernet_of(settings) if keyed else None, read_store(settings)
    except typer.Exit:  # a RuntimeError too (click's), raised by fail() inside the block
        raise
    except (FernetKeyMissing, NotDecrypted) as error:
        fail(command, str(error))
    except (KafkaException, RuntimeError) as error:
        fail(command, f"cannot read tock.secrets at {settings.bootstrap}: {error}")


def _append(settings: Settings, events: Sequence[Any], command: str) -> None:
    from confluent_kafka import KafkaException

    from infra.log import DeliveryFailed
    from infra.secrets.store import append_secrets

    try:
        append_secrets(settings, list(events))
    except (DeliveryFailed, KafkaException) as error:
        fail(command, f"the log did not acknowledge the change: {error} (is the broker at {settings.bootstrap} "
                      "up, and were the topics created with `tock topics create`?)")


def _change(ctx: typer.Context, command: str, decide: Callable[[Fernet, StoredSecrets], Sequence[Any]],
            done: str) -> None:
    with _store(ctx, command) as (settings, fernet, state):
        events = decide(fernet, state)
    if events:
        _append(settings, events, command)
        typer.echo(done)
    else:
        typer.echo(f"{done} (unchanged: it was so already)")


@variables_app.command("set")
def variables_set(ctx: typer.Context, key: str = typer.Argument(..., callback=_name),
                  value: str = typer.Argument(..., help="The value (text; JSON for Variable.get(..., "
                                                        "deserialize_json=True))."),
                  description: str | None = typer.Option(None, "--description")) -> None:
    """Set a variable (appends VariableSet, its value encrypted; nothing when it holds this value already)."""
    from infra.secrets import manage

    _change(ctx, "variables set", lambda fernet, state: manage.set_variable(
        state, fernet, key, value, description, by=WRITER, at=time.time()), f"variable {key} set")


@variables_app.command("get")
def variables_get(ctx: typer.Context, key: str = typer.Argument(...)) -> None:
    """Print a variable's value (exit 1 when the store has none)."""
    from infra.secrets.store import variable_value

    with _store(ctx, "variables get") as (_settings, fernet, state):
        stored = state.variables.get(key)
        if stored is None:
            fail("variables get", f"no variable {key} in Tock's store (see `tock variables list`)")
        else:
            typer.echo(variable_value(fernet, stored))


@variables_app.command("list")
def variables_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Variables by key, with their descriptions (never their values)."""
    with _store(ctx, "variables list", keyed=False) as (_settings, _fernet, state):
        rows = [{"key": key, "description": stored.description, "set_by": stored.set_by, "set_at": stored.at}
                for key, stored in sorted(state.variables.items())]
    _show(rows, ("key", "description", "set_by", "set_at"), as_json, title="variables")


@variables_app.command("delete")
def variables_delete(ctx: typer.Context, key: str = typer.Argument(...)) -> None:
    """Delete a variable (appends VariableDeleted)."""
    from infra.secrets import manage

    with _store(ctx, "variables delete", keyed=False) as (settings, _fernet, state):
        events = manage.delete_variable(state, key, by=WRITER, at=time.time())
    if not events:
        fail("variables delete", f"no variable {key} in Tock's store (see `tock variables list`)")
    _append(settings, events, "variables delete")
    typer.echo(f"variable {key} deleted")


@connections_app.command("add")
def connections_add(ctx: typer.Context, conn_id: str = typer.Argument(..., callback=_name),
                    conn_uri: str | None = typer.Option(None, "--conn-uri", help="The connection as a URI."),
                    conn_json: str | None = typer.Option(None, "--conn-json", help="The connection as JSON."),
                    conn_type: str | None = typer.Option(None, "--conn-type"),
                    conn_host: str | None = typer.Option(None, "--conn-host"),
                    conn_login: str | None = typer.Option(None, "--conn-login"),
                    conn_password: str | None = typer.Option(None, "--conn-password"),
                    conn_schema: str | None = typer.Option(None, "--conn-schema"),
                    conn_port: int | None = typer.Option(None, "--conn-port"),
                    conn_extra: str | None = typer.Option(None, "--conn-extra", help="JSON object."),
                    conn_description: str | None = typer.Option(None, "--conn-description"),
                    replace: bool = typer.Option(False, "--replace", help="Replace a different connection "
                                                                          "of this id.")) -> None:
    """Add a connection (appends ConnectionSet, encrypted; nothing when this very one is there already)."""
    from infra.secrets import manage

    connection = _connection(conn_id, conn_uri, conn_json, {
        "conn_type": conn_type, "host": conn_host, "login": conn_login, "password": conn_password,
        "schema": conn_schema, "port": conn_port, "extra": conn_extra}, conn_description)

    def decide(fernet: Fernet, state: StoredSecrets) -> Sequence[Any]:
        events = manage.set_connection(state, fernet, conn_id, connection.to_dict(), by=WRITER, at=time.time())
        if events and conn_id in state.connections and not replace:
            fail("connections add", f"connection {conn_id} exists and differs (use --replace to replace it)")
        return events

    _change(ctx, "connections add", decide, f"connection {conn_id} added")


def _connection(conn_id: str, uri: str | None, as_json: str | None, fields: dict[str, Any],
                description: str | None) -> Any:
    from tock.connections import Connection

    given = [name for name, value in (("--conn-uri", uri), ("--conn-json", as_json)) if value is not None]
    if len(given) > 1 or (given and any(value is not None for value in fields.values())):
        fail("connections add", "give one of --conn-uri, --conn-json or the --conn-* fields", code=2)
    try:
        if uri is not None:
            connection = Connection.from_uri(uri, conn_id)
        elif as_json is not None:
            connection = Connection.from_json(as_json, conn_id)
        else:
            connection = Connection(conn_id=conn_id, **fields)
    except ValueError as error:
        fail("connections add", str(error), code=2)
    if description is not None:
        connection.description = description
    return connection


@connections_app.command("get")
def connections_get(ctx: typer.Context, conn_id: str = typer.Argument(...),
                    reveal: bool = typer.Option(False, "--reveal", help="Show the password too.")) -> None:
    """Print a connection as JSON (its password as *** unless --reveal)."""
    from infra.secrets.manage import redacted
    from infra.secrets.store import connection_fields

    with _store(ctx, "connections get") as (_settings, fernet, state):
        stored = state.connections.get(conn_id)
        if stored is None:
            fail("connections get", f"no connection {conn_id} in Tock's store (see `tock connections list`)")
            return
        fields = connection_fields(fernet, stored)
    shown = {"conn_id": conn_id, **(fields if reveal else redacted(fields))}
    typer.echo(json.dumps(shown, indent=2, sort_keys=True))


@connections_app.command("list")
def connections_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Connections by id, type and description (never their fields)."""
    with _store(ctx, "connections list", keyed=False) as (_settings, _fernet, state):
        rows = [{"conn_id": conn_id, "conn_type": stored.conn_type, "description": stored.description,
                 "set_by": stored.set_by, "set_at": stored.at} for conn_id, stored in sorted(state.connections.items())]
    _show(rows, ("conn_id", "conn_type", "description", "set_by", "set_at"), as_json, title="connections")


@connections_app.command("delete")
def connections_delete(ctx: typer.Context, conn_id: str = typer.Argument(...)) -> None:
    """Delete a connection (appends ConnectionDeleted)."""
    from infra.secrets import manage

    with _store(ctx, "connections delete", keyed=False) as (settings, _fernet, state):
        events = manage.delete_connection(state, conn_id, by=WRITER, at=time.time())
    if not events:
        fail("connections delete", f"no connection {conn_id} in Tock's store (see `tock connections list`)")
    _append(settings, events, "connections delete")
    typer.echo(f"connection {conn_id} deleted")
