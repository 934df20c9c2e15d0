"""Logins: the login and logout forms, the session a page runs as, and CSRF checks of forms.

Pages depend on :func:`page_user` (anonymous: redirected to the login page); forms on
:func:`form_user`, which also checks the form's CSRF token and the role the action needs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy import Engine

from projections import queries
from services.api import accounts
from services.api.auth import Principal
from services.api.core import dag_list, login_limits, views
from services.api.ui import grid_html, logouts, sessions

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
STATIC = Path(__file__).parent / "static"
templates.env.filters["when"] = lambda at: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) if at else "—"
templates.env.filters["duration"] = views.duration
templates.env.filters["pretty_json"] = views.pretty_json
templates.env.globals["row_cells"] = grid_html.row_cells
templates.env.globals["group_cells"] = grid_html.group_cells
templates.env.globals["owner_list"] = dag_list.owner_list
web = APIRouter(include_in_schema=False)


class LoginRequired(Exception):
    """A page was asked for without a session: the handler redirects to the login page."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path


class UiState:
    """What the UI keeps per API process: the signing key and the wrong-password failures."""

    def __init__(self, settings) -> None:
        self.key = (settings.api_secret_key or secrets.token_hex(32)).encode()
        self.limits = login_limits.LoginLimits(settings.api_login_attempts, settings.api_login_window)
        self.trusted_proxies = frozenset(filter(None, (part.strip() for part in
                                                       settings.api_trusted_proxies.split(","))))
        self.failures = login_limits.Failures()
        self.lock = threading.Lock()
        self.session_seconds = settings.api_session_hours * 3600
        self.cookie_secure = settings.api_cookie_secure


def ui_state(request: Request) -> UiState:
    return request.app.state.ui


def session_principal(request: Request) -> Principal | None:
    """Who the session cookie stands for, if it is valid, not logged out, and its account is the one it
    began with (same incarnation, same password)."""
    key, engine = ui_state(request).key, request.app.state.engine
    session = sessions.decode_session(key, request.cookies.get(sessions.SESSION_COOKIE), time.time())
    if session is None:
        return None
    row = queries.user(engine, session.username)
    if row is None or not hmac.compare_digest(session.stamp, sessions.account_stamp(key, row["username"],
                                                                                     row["password_hash"])):
        return None  # deleted, created again, or a new password since this session began
    if logouts.ended(engine, session.nonce):
        return None
    request.state.session = session
    return Principal(row["username"], row["role"])


def page_user(request: Request) -> Principal:
    principal = session_principal(request)
    if principal is None:
        raise LoginRequired(request.url.path)
    request.state.principal = principal
    return principal


def form_user(request: Request, csrf: str, role: str) -> Principal:
    """The session's principal for a form post: 403 without a valid CSRF token or the role."""
    principal = page_user(request)
    if not sessions.csrf_matches(ui_state(request).key, request.state.session.nonce, csrf):
        raise HTTPException(status_code=403, detail="the form's CSRF token is missing or wrong; reload the page")
    if not accounts.allows(principal.role, role):
        raise HTTPException(status_code=403, detail=f"{principal.username} is a {principal.role}; "
                                                    f"this needs the {role} role")
    return principal


def csrf_of(request: Request) -> str:
    return sessions.csrf_token(ui_state(request).key, request.state.session.nonce)


def render(request: Request, template: str, status_code: int = 200, **context) -> Response:
    principal = getattr(request.state, "principal", None)
    csrf = csrf_of(request) if principal is not None else ""
    return templates.TemplateResponse(request, template, {"user": principal, "csrf": csrf, **context},
                                      status_code=status_code)


def live(request: Request, template: str, context: dict) -> JSONResponse:
    """A page fragment as the JSON ui.js polls: its HTML and a version that changes with it."""
    html = templates.get_template(template).render({"request": request, **context})
    return JSONResponse({"html": html, "version": hashlib.sha256(html.encode()).hexdigest()[:16]})


def known_dag(engine: Engine, dag_id: str) -> dict:
    """The DAG's row for a page (404 if the tables do not know it)."""
    dag = queries.dag(engine, dag_id)
    if dag is None:
        raise HTTPException(status_code=404, detail=f"no DAG {dag_id}")
    return dag


def _secure(request: Request) -> bool:
    forced = ui_state(request).cookie_secure
    return forced if forced is not None else request.url.scheme == "https"


def _set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", secure=_secure(request),
                        path="/")


def _safe_next(next_path: str) -> str:
    return next_path if next_path.startswith("/") and not next_path.startswith("//") else "/"


@web.get("/login")
def login_page(request: Request, next: str = "/", error: str = "") -> Response:
    nonce = request.cookies.get(sessions.LOGIN_COOKIE) or sessions.new_nonce()
    response = templates.TemplateResponse(request, "login.html", {
        "user": None, "csrf": sessions.csrf_token(ui_state(request).key, nonce), "next": _safe_next(next),
        "error": error}, status_code=401 if error else 200)
    _set_cookie(request, response, sessions.LOGIN_COOKIE, nonce, 3600)
    return response


@web.post("/login")
def login(request: Request, username: str = Form(..., max_length=200), password: str = Form(..., max_length=1024),
          csrf: str = Form(""), next: str = Form("/")) -> Response:
    state = ui_state(request)
    if not sessions.csrf_matches(state.key, request.cookies.get(sessions.LOGIN_COOKIE), csrf):
        raise HTTPException(status_code=403, detail="the login form's CSRF token is missing or wrong; reload it")
    key = f"{username}|{login_limits.client_address(request, state.trusted_proxies)}"
    with state.lock:  # checked and counted in one step: concurrent guesses each take an attempt
        wait = login_limits.refused_for(state.failures, key, time.time(), state.limits)
        if not wait:  # counted as wrong until the password proves right
            state.failures = login_limits.failed(state.failures, key, time.time(), state.limits)
    if wait:
        raise HTTPException(status_code=429, detail=f"too many wrong passwords; try again in {wait:.0f} s",
                            headers={"Retry-After": str(int(wait) + 1)})
    row = queries.user(request.app.state.engine, username)
    if not accounts.login_matches(row["password_hash"] if row is not None else None, password):
        return RedirectResponse(f"/login?error=1&next={quote(_safe_next(next))}", status_code=303)
    with state.lock:
        state.failures = login_limits.succeeded(state.failures, key)
    session = sessions.Session(username, time.time() + state.session_seconds, sessions.new_nonce(),
                               sessions.account_stamp(state.key, row["username"], row["password_hash"]))
    response = RedirectResponse(_safe_next(next), status_code=303)
    _set_cookie(request, response, sessions.SESSION_COOKIE, sessions.encode_session(state.key, session),
                int(state.session_seconds))
    response.delete_cookie(sessions.LOGIN_COOKIE, path="/")
    return response


@web.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> Response:
    principal = form_user(request, csrf, "viewer")
    session: sessions.Session = request.state.session
    logouts.end(request.app.state.engine, session.nonce, principal.username, session.expires, time.time())
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(sessions.SESSION_COOKIE, path="/")
    return response
