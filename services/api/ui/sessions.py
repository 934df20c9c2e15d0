"""Web UI sessions and CSRF tokens: HMAC-signed cookies, nothing stored on the server.

The session cookie holds the user name, an expiry, a random nonce and the account's stamp, signed
with TOCK_API_SECRET_KEY. Every form carries a CSRF token derived from the nonce (before login,
from a nonce in its own cookie), so a page of another site cannot post with the user's
cookie. The user's role is read from ``tock_user`` on every request, and the stamp (a keyed hash
of the account's password hash, which every UserCreated salts afresh) must still match: a deleted
account's sessions end at once, a new password or a re-created account ends the old sessions.
Logout ends a session on the server too (logouts.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

SESSION_COOKIE = "tock_session"
LOGIN_COOKIE = "tock_login"  # the nonce of the login form's CSRF token


@dataclass(frozen=True, slots=True)
class Session:
    username: str
    expires: float
    nonce: str
    stamp: str = ""  # account_stamp() of the account when the session began


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def encode_session(key: bytes, session: Session) -> str:
    fields = [session.username, session.expires, session.nonce, session.stamp]
    body = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()
    return f"{body}.{_sign(key, 'session:' + body)}"


def decode_session(key: bytes, cookie: str | None, now: float) -> Session | None:
    """The session a cookie holds if its signature is ours and it has not expired."""
    body, _, signature = (cookie or "").partition(".")
    if not body or not hmac.compare_digest(signature, _sign(key, "session:" + body)):
        return None
    try:
        username, expires, nonce, stamp = json.loads(base64.urlsafe_b64decode(body.encode()))
    except (ValueError, TypeError):
        return None
    return Session(username, float(expires), nonce, stamp) if expires > now else None


def account_stamp(key: bytes, username: str, password_hash: str) -> str:
    """What binds a session to one password of one incarnation of an account (no secret in clear)."""
    return _sign(key, f"account:{username}:{password_hash}")[:32]


def csrf_token(key: bytes, nonce: str) -> str:
    return _sign(key, "csrf:" + nonce)


def csrf_matches(key: bytes, nonce: str | None, given: str | None) -> bool:
    return bool(nonce) and bool(given) and hmac.compare_digest(csrf_token(key, nonce), given)
