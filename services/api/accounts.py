"""Roles, password hashes and API tokens: the rules, with no I/O but hashing.

Passwords are hashed with argon2id (argon2-cffi's defaults). An API token is
``tock_<token id>_<secret>``: the id finds its row, the secret's SHA-256 is compared in
constant time. Tokens are 256-bit random secrets, so a slow hash would add nothing.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from typing import NamedTuple

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

ROLES = ("viewer", "operator", "admin")  # each allows what the ones before it allow
TOKEN_PREFIX = "tock"
USERNAME_PATTERN = r"^[A-Za-z0-9._@-]{1,64}$"

_hasher = PasswordHasher()


def allows(role: str, needed: str) -> bool:
    """Whether ``role`` may do what ``needed`` may (viewer < operator < admin)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def password_matches(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def login_matches(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` opens the account whose hash is ``password_hash``. For an unknown account
    (None) the same argon2 work is done against a decoy hash, so the time a login takes does not tell
    whether the user name exists."""
    if password_hash is None:
        password_matches(_decoy_hash(), password)
        return False
    return password_matches(password_hash, password)


@functools.cache
def _decoy_hash() -> str:
    return _hasher.hash(secrets.token_urlsafe(16))  # the hasher's own parameters: the cost of a real hash


def new_password() -> str:
    """A generated password to print once."""
    return secrets.token_urlsafe(15)


class NewToken(NamedTuple):
    token_id: str
    token: str  # shown once, never stored
    token_hash: str


def new_token() -> NewToken:
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    return NewToken(token_id, f"{TOKEN_PREFIX}_{token_id}_{secret}", secret_hash(secret))


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """(token id, secret) of a well-formed token, else None."""
    prefix, _, rest = token.partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != TOKEN_PREFIX or not token_id or not secret:
        return None
    return token_id, secret


def secret_matches(token_hash: str, secret: str) -> bool:
    return hmac.compare_digest(token_hash.encode(), secret_hash(secret).encode())
