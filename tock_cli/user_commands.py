"""``tock users create|list|delete`` and ``tock tokens create|list|revoke``: accounts, through the log.

Each change is an event in ``tock.users`` (hashes only); the API sees it once the projector
has folded it into the ``tock_user`` / ``api_token`` tables. A generated password and a new
token are printed once and never stored.
"""

from __future__ import annotations

import enum
import re
import sys
import time

import typer

from projections import queries
from schemas import TokenCreated, TokenRevoked, UserCreated, UserDeleted
from services.api import accounts
from tock_cli import settings_of
from tock_cli.appending import append_commands, fail, tables
from tock_cli.query_commands import JSON_OPTION, _query, _show

REQUESTED_BY = "cli"
users_app = typer.Typer(help="Accounts of the API and web UI: viewer, operator or admin.", no_args_is_help=True)
tokens_app = typer.Typer(help="API bearer tokens of accounts.", no_args_is_help=True)


class Role(str, enum.Enum):
    viewer = "viewer"
    operator = "operator"
    admin = "admin"


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
    app.add_typer(tokens_app, name="tokens")


def _username(value: str) -> str:
    if not re.fullmatch(accounts.USERNAME_PATTERN, value):
        raise typer.BadParameter("1 to 64 letters, digits, '.', '_', '@' or '-'")
    return value


@users_app.command("create")
def users_create(ctx: typer.Context, username: str = typer.Argument(..., callback=_username),
                 role: Role = typer.Option(..., "--role", help="viewer reads; operator also runs commands; "
                                                               "admin also manages users."),
                 password_stdin: bool = typer.Option(False, "--password-stdin",
                                                     help="Read the password from standard input (else one is "
                                                          "generated and printed once)."),
                 replace: bool = typer.Option(False, "--replace", help="Replace an existing account's role and "
                                                                       "password.")) -> None:
    """Create an account (appends UserCreated with the password's argon2 hash)."""
    with tables(ctx, "users create") as engine:
        exists = queries.user(engine, username) is not None
    if exists and not replace:
        fail("users create", f"user {username} exists (use --replace to change its role or password)")
    password = sys.stdin.readline().rstrip("\n") if password_stdin else accounts.new_password()
    if len(password) < 8:
        fail("users create", "the password needs at least 8 characters", code=2)
    append_commands(settings_of(ctx), [UserCreated(username=username, role=role.value,
                                                   password_hash=accounts.hash_password(password),
                                                   created_by=REQUESTED_BY, at=time.time())], "users create")
    typer.echo(f"user {username} ({role.value}) created")
    if not password_stdin:
        typer.echo(f"password: {password}  (shown once)")


@users_app.command("list")
def users_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Accounts and their roles (never their password hashes)."""
    rows = _query(ctx, lambda engine: queries.users(engine, limit=100_000))
    _show(rows, ("username", "role", "created_by", "created_at", "updated_at"), as_json, title="users")


@users_app.command("delete")
def users_delete(ctx: typer.Context, username: str = typer.Argument(...)) -> None:
    """Delete an account: its sessions and tokens stop working (appends UserDeleted)."""
    with tables(ctx, "users delete") as engine:
        if queries.user(engine, username) is None:
            fail("users delete", f"no user {username} (see `tock users list`)")
    append_commands(settings_of(ctx), [UserDeleted(username=username, deleted_by=REQUESTED_BY, at=time.time())],
                    "users delete")
    typer.echo(f"user {username} deleted")


@tokens_app.command("create")
def tokens_create(ctx: typer.Context, username: str = typer.Argument(..., help="The token's owner; it has "
                                                                               "the owner's role."),
                  description: str = typer.Option("", "--description", help="What the token is for.")) -> None:
    """Create an API token for USERNAME and print it once (the log keeps only its SHA-256)."""
    with tables(ctx, "tokens create") as engine:
        if queries.user(engine, username) is None:
            fail("tokens create", f"no user {username} (see `tock users list`)")
    token = accounts.new_token()
    append_commands(settings_of(ctx), [TokenCreated(token_id=token.token_id, username=username,
                                                    token_hash=token.token_hash, description=description,
                                                    created_by=REQUESTED_BY, at=time.time())], "tokens create")
    typer.echo(f"token {token.token_id} of {username}: {token.token}  (shown once)")


@tokens_app.command("list")
def tokens_list(ctx: typer.Context, username: str | None = typer.Argument(None, help="Only this user's."),
                as_json: bool = JSON_OPTION) -> None:
    """Tokens by id, owner and state (never the tokens themselves)."""
    rows = _query(ctx, lambda engine: queries.tokens(engine, username=username, limit=100_000))
    _show(rows, ("token_id", "username", "description", "created_at", "revoked_at"), as_json, title="tokens")


@tokens_app.command("revoke")
def tokens_revoke(ctx: typer.Context, token_id: str = typer.Argument(..., help="The id `tokens list` shows.")) -> None:
    """Revoke a token (appends TokenRevoked)."""
    with tables(ctx, "tokens revoke") as engine:
        owners = [row["username"] for row in queries.tokens(engine, limit=100_000) if row["token_id"] == token_id]
    if not owners:
        fail("tokens revoke", f"no token {token_id} (see `tock tokens list`)")
    append_commands(settings_of(ctx), [TokenRevoked(token_id=token_id, username=owners[0],
                                                    revoked_by=REQUESTED_BY, at=time.time())], "tokens revoke")
    typer.echo(f"token {token_id} revoked")
