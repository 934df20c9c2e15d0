"""The FastAPI app: read endpoints over the projection tables, /health, /metrics, and the commands."""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from contextlib import asynccontextmanager
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DataError, SQLAlchemyError, StatementError

import services.api.task_commands  # noqa: F401 - adds the task commands to the commands router
from infra.settings import Settings
from projections import queries
from projections.committer import retry_outages
from projections.db import create_tables, open_engine
from schemas.decisions_view import decision_fields
from schemas.tasks import instance_name
from services.api import models
from services.api.assets import asset_commands, asset_reads
from services.api.auth import VIEWER, Principal, authenticate, bearer_scheme
from services.api.backfills import status
from services.api.catalog import catalog
from services.api.commands import CommandLog, commands
from services.api.executors import executors
from services.api.logs import FollowSlots, logs
from services.api.metrics import ApiMetrics
from services.api.params import LIMIT, MAP_INDEX, OFFSET, SOME_MAP_INDEX
from services.api.pools import pool_commands, pool_reads
from services.api.secrets import secrets
from services.api.targets import Refused
from services.api.ui import logouts
from services.api.ui.actions import actions
from services.api.ui.pages import pages
from services.api.ui.web import STATIC, LoginRequired, UiState, session_principal, web
from services.api.users import users

log = logging.getLogger("tock.api")


DESCRIPTION = """Reads of the projections of Tock's log; commands are appended to the log, never to tables.

Commands answer 202 once the log has acknowledged them; the owning scheduler then applies them
(or rejects them: see `GET /api/v1/commands/{request_id}`). Send an `Idempotency-Key` header to
make a retry safe: the same key is the same request id, applied once, with the same response.
A 503 says whether the command was not appended, or was not acknowledged in time (then it may be
in the log all the same): retry with the same key either way.
Unknown DAGs, runs and task instances get 404; impossible commands 409 with the reason; malformed
input 422. Every endpoint but /health needs `Authorization: Bearer <token>` (401 without, 403 when the
token's role is too weak): viewers read, operators also run commands, admins also manage users. This
document and its viewers (/docs, /redoc) need a viewer's token or a web UI login.
Tokens come from `tock tokens create`; TOCK_API_TOKEN, when set, is an admin token."""


def engine_of(request: Request) -> Engine:
    return request.app.state.engine


PLACEHOLDER_TOKENS = frozenset({"change-me"})  # infra/deploy/base/secret.yaml's


class UnsafeSettings(ValueError):
    """Settings the API refuses to serve with; the message says which and what to do."""


def refuse_unsafe_settings(settings: Settings) -> None:
    """Raise UnsafeSettings for the documented placeholder admin token on an address others can reach:
    whoever read the deploy files would be an admin."""
    if settings.api_token in PLACEHOLDER_TOKENS and not _loopback(settings.api_host):
        raise UnsafeSettings(
            f"TOCK_API_TOKEN is the placeholder {settings.api_token!r} of infra/deploy/base/secret.yaml and the "
            f"API would listen on {settings.api_host} (TOCK_API_HOST), not loopback: anyone who read the deploy "
            "files would be an admin. Put a long random secret in the tock-secrets Secret (e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`), or leave TOCK_API_TOKEN unset.")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def _create_tables(engine: Engine) -> None:
    create_tables(engine)
    logouts.create_table(engine)


def create_app(settings: Settings) -> FastAPI:
    """The API over ``settings``' database; commands go to its Kafka log. Raises UnsafeSettings for
    settings it refuses to serve with (:func:`refuse_unsafe_settings`)."""
    refuse_unsafe_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        app.state.command_log.close()
        app.state.engine.dispose()

    app = FastAPI(title="Tock API", version="1", lifespan=lifespan, description=DESCRIPTION,
                  docs_url=None, redoc_url=None, openapi_url=None)  # served behind a login: _add_documents
    app.state.settings = settings
    app.state.engine = open_engine(settings)
    # An API started before the projector answers with empty lists; one started while the database
    # is away waits for it (the soak restarted the API during a PostgreSQL restart: it exited 1).
    retry_outages(lambda: _create_tables(app.state.engine), threading.Event())
    app.state.command_log = CommandLog(settings)
    app.state.metrics = ApiMetrics(app.state.engine)
    app.state.ui = UiState(settings)
    app.state.log_follows = FollowSlots(settings.api_log_follows_per_user)
    _add_error_handlers(app)
    _add_metrics(app)
    _add_documents(app)
    app.include_router(open_reads)
    for router in (reads, status, logs, executors, catalog):
        app.include_router(router, dependencies=[Depends(VIEWER)],
                           responses={401: {"description": "missing or wrong bearer token"}})
    app.include_router(commands)
    app.include_router(pool_reads)
    app.include_router(pool_commands)
    app.include_router(asset_reads)
    app.include_router(asset_commands)
    app.include_router(users)
    app.include_router(secrets)
    for router in (web, pages, actions):
        app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="static")
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()]
        return JSONResponse(status_code=422, content={"detail": "invalid request: " + "; ".join(problems),
                                                      "errors": jsonable_errors(error)})

    @app.exception_handler(LoginRequired)
    async def login_first(_request: Request, error: LoginRequired) -> RedirectResponse:
        return RedirectResponse(f"/login?next={quote(error.next_path)}", status_code=303)

    @app.exception_handler(Refused)
    async def refused(_request: Request, error: Refused) -> JSONResponse:
        return JSONResponse(status_code=error.status, content={"detail": error.reason})

    @app.exception_handler(DataError)
    @app.exception_handler(StatementError)
    async def unstorable(_request: Request, error: SQLAlchemyError) -> JSONResponse:
        # e.g. a NUL character in a path parameter, which PostgreSQL text cannot hold
        return JSONResponse(status_code=422, content={"detail": f"invalid value: {error.orig or error}"})


def jsonable_errors(error: RequestValidationError) -> list[dict]:
    return [{"loc": [str(part) for part in item["loc"]], "msg": item["msg"]} for item in error.errors()]


def _add_metrics(app: FastAPI) -> None:
    @app.middleware("http")
    async def measure(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        metrics: ApiMetrics = request.app.state.metrics
        metrics.requests.labels(request.method, path, str(response.status_code)).inc()
        metrics.latency.labels(request.method, path).observe(time.perf_counter() - started)
        return response

    @app.get("/metrics", include_in_schema=False, dependencies=[Depends(VIEWER)])
    def prometheus(request: Request) -> Response:
        return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def reader(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> Principal:
    """A viewer by bearer token or by web UI session (the documents are read from a browser too);
    anonymous: 401 for a client that sent a token or asks for JSON, else to the login page."""
    if credentials is None and (principal := session_principal(request)) is not None:
        return principal
    if credentials is None and request.url.path != OPENAPI:
        raise LoginRequired(request.url.path)
    return authenticate(request, credentials)  # every role may read


OPENAPI = "/openapi.json"


def _add_documents(app: FastAPI) -> None:
    @app.get(OPENAPI, include_in_schema=False, dependencies=[Depends(reader)])
    def openapi_document() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[Depends(reader)])
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=OPENAPI, title=f"{app.title} - Swagger UI")

    @app.get("/redoc", include_in_schema=False, dependencies=[Depends(reader)])
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=OPENAPI, title=f"{app.title} - ReDoc")


# --- reads ---------------------------------------------------------------------------

reads = APIRouter()
open_reads = APIRouter()  # for probes that carry no credentials


def _found(row, what: str):
    if row is None:
        raise HTTPException(status_code=404, detail=f"no {what}")
    return row


@open_reads.get("/health", response_model=models.Health, tags=["health"],
           responses={503: {"model": models.Health}})
def health(engine: Engine = Depends(engine_of)):
    """ok when the database answers. Anonymous (probes carry no credentials), so a failure says only
    "database unavailable": the driver's text names hosts, users and schemas (the API's log has it)."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        log.warning("/health: the database does not answer: %s", error.orig or error)
        return JSONResponse(status_code=503, content={"status": "degraded", "database": "database unavailable"})
    return {"status": "ok", "database": "ok"}


@reads.get("/api/v1/dags", response_model=models.Page[models.Dag], tags=["dags"])
def list_dags(paused: bool | None = None, active: bool | None = None, limit: int = LIMIT, offset: int = OFFSET,
              engine: Engine = Depends(engine_of)):
    """DAGs by id; filter by paused / active (active = defined by a DAG file now)."""
    items = queries.dags(engine, paused=paused, active=active, limit=limit, offset=offset)
    return {"items": items, "limit": limit, "offset": offset}


@reads.get("/api/v1/dags/{dag_id}", response_model=models.Dag, tags=["dags"])
def get_dag(dag_id: str, engine: Engine = Depends(engine_of)):
    return _found(queries.dag(engine, dag_id), f"DAG {dag_id}")


@reads.get("/api/v1/runs", response_model=models.Page[models.DagRun], tags=["runs"])
def list_runs(dag_id: str | None = None, state: str | None = None, limit: int = LIMIT, offset: int = OFFSET,
              engine: Engine = Depends(engine_of)):
    """Runs of every DAG (or one), newest first; filter by state."""
    items = queries.runs(engine, dag_id=dag_id, state=state, limit=limit, offset=offset)
    return {"items": items, "limit": limit, "offset": offset}


@reads.get("/api/v1/dags/{dag_id}/runs", response_model=models.Page[models.DagRun], tags=["runs"])
def list_dag_runs(dag_id: str, state: str | None = None, limit: int = LIMIT, offset: int = OFFSET,
                  engine: Engine = Depends(engine_of)):
    return list_runs(dag_id, state, limit, offset, engine)


@reads.get("/api/v1/dags/{dag_id}/runs/{run_id}", response_model=models.DagRun, tags=["runs"])
def get_run(dag_id: str, run_id: str, engine: Engine = Depends(engine_of)):
    return _found(queries.run(engine, dag_id, run_id), f"run {run_id} of DAG {dag_id}")


@reads.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks", response_model=models.Page[models.TaskInstance],
           tags=["tasks"])
def list_task_instances(dag_id: str, run_id: str, state: str | None = None, limit: int = LIMIT,
                        offset: int = OFFSET, engine: Engine = Depends(engine_of)):
    items = queries.task_instances(engine, dag_id, run_id, state=state, limit=limit, offset=offset)
    return {"items": queries.with_task_shape(engine, dag_id, items), "limit": limit, "offset": offset}


@reads.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}", response_model=models.TaskInstance,
           tags=["tasks"])
def get_task_instance(dag_id: str, run_id: str, task_id: str, map_index: int = MAP_INDEX,
                      engine: Engine = Depends(engine_of)):
    """A task instance; ``map_index``: instance N of a mapped task (-1: a task, or a mapped task as a whole)."""
    named = instance_name(task_id, map_index)
    instance = _found(queries.task_instance(engine, dag_id, run_id, task_id, map_index), f"task instance {named}")
    return queries.with_task_shape(engine, dag_id, [instance])[0]


@reads.get("/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/history",
           response_model=models.TaskHistoryPage, tags=["tasks"])
def task_history(dag_id: str, run_id: str, task_id: str, limit: int = LIMIT, offset: int = OFFSET,
                 map_index: int | None = SOME_MAP_INDEX, engine: Engine = Depends(engine_of)):
    """Every event of the task instance in log order, those of old tries included (of a mapped task: of
    every instance, or with ``map_index`` of that one and of the task as a whole); each decision (a skip,
    an upstream failure, a skipped try, an empty task's success, a branch's choice) with its fields and why."""
    items = queries.task_history(engine, dag_id, run_id, task_id, limit=limit, offset=offset, map_index=map_index)
    shape = queries.task_shapes(engine, dag_id).get(task_id, {})
    return {"items": [{**item, **decision_fields(item["event_type"], item.get("payload") or {})} for item in items],
            "limit": limit, "offset": offset, **shape}


@reads.get("/api/v1/import-errors", response_model=models.Page[models.ImportError_], tags=["parsing"])
def list_import_errors(limit: int = LIMIT, offset: int = OFFSET, engine: Engine = Depends(engine_of)):
    return {"items": queries.import_errors(engine, limit=limit, offset=offset), "limit": limit, "offset": offset}


@reads.get("/api/v1/parse-status", response_model=models.Page[models.ParseStatus], tags=["parsing"])
def list_parse_status(state: str | None = None, limit: int = LIMIT, offset: int = OFFSET,
                      engine: Engine = Depends(engine_of)):
    items = queries.parse_statuses(engine, state=state, limit=limit, offset=offset)
    return {"items": items, "limit": limit, "offset": offset}


@reads.get("/api/v1/schedulers", response_model=models.Page[models.Scheduler], tags=["schedulers"])
def list_schedulers(request: Request, state: queries.SchedulerState | None = None, limit: int = LIMIT,
                    offset: int = OFFSET, engine: Engine = Depends(engine_of)):
    """Scheduler instances by id; state is alive, stopped, or dead: no heartbeat for longer than the
    scheduler session timeout (TOCK_SCHEDULER_SESSION_TIMEOUT) and never stopped, e.g. after kill -9."""
    silence_limit = queries.scheduler_silence_limit(request.app.state.settings)
    items = queries.schedulers(engine, now=time.time(), silence_limit=silence_limit, state=state,
                               limit=limit, offset=offset)
    return {"items": items, "limit": limit, "offset": offset}
