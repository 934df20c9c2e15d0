"""The Variables and Connections pages (admins only): Tock's store, names and descriptions, never
values; a form to set a variable or add a connection by URI, and a button to delete each. The forms
post through the API's own functions (services/api/secrets.py), so the checks and events are the API's."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from services.api import accounts
from services.api import secrets as api
from services.api.auth import Principal
from services.api.ui.web import form_user, page_user, render

secret_pages = APIRouter(include_in_schema=False)
ADMIN_ROLE = "admin"


def _admin(request: Request, user: Principal = Depends(page_user)) -> Principal:
    if not accounts.allows(user.role, ADMIN_ROLE):
        raise HTTPException(status_code=403, detail=f"{user.username} is a {user.role}; variables and "
                                                    "connections need the admin role")
    return user


@secret_pages.get("/variables")
def variables_page(request: Request, _user: Principal = Depends(_admin)) -> Response:
    return render(request, "variables.html", variables=api.list_variables(request), section="variables")


@secret_pages.get("/connections")
def connections_page(request: Request, _user: Principal = Depends(_admin)) -> Response:
    return render(request, "connections.html", connections=api.list_connections(request), section="connections")


@secret_pages.post("/variables")
def set_variable(request: Request, key: str = Form(..., pattern=api.manage.KEY_PATTERN),
                 value: str = Form(..., max_length=512 * 1024), description: str = Form("", max_length=4096),
                 csrf: str = Form("")) -> Response:
    request.state.principal = form_user(request, csrf, ADMIN_ROLE)
    api.put_variable(api.VariableBody(value=value, description=description or None), request, key)
    return RedirectResponse("/variables", status_code=303)


@secret_pages.post("/variables/{key}/delete")
def delete_variable(key: str, request: Request, csrf: str = Form("")) -> Response:
    request.state.principal = form_user(request, csrf, ADMIN_ROLE)
    api.delete_variable(key, request)
    return RedirectResponse("/variables", status_code=303)


@secret_pages.post("/connections")
def add_connection(request: Request, conn_id: str = Form(..., pattern=api.manage.KEY_PATTERN),
                   uri: str = Form(..., max_length=64 * 1024), description: str = Form("", max_length=4096),
                   csrf: str = Form("")) -> Response:
    request.state.principal = form_user(request, csrf, ADMIN_ROLE)
    api.put_connection(api.ConnectionBody(uri=uri, description=description or None), request, conn_id)
    return RedirectResponse("/connections", status_code=303)


@secret_pages.post("/connections/{conn_id}/delete")
def delete_connection(conn_id: str, request: Request, csrf: str = Form("")) -> Response:
    request.state.principal = form_user(request, csrf, ADMIN_ROLE)
    api.delete_connection(conn_id, request)
    return RedirectResponse("/connections", status_code=303)
