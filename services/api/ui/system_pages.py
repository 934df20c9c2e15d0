"""Pages about the system rather than one DAG: the DAG files' parse status, the cluster, the pools and the
assets."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import Engine

from projections import queries
from projections.executor_status import read_executor_status, silence_limit
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.core import views
from services.api.ui.web import live, page_user, render

system_pages = APIRouter(include_in_schema=False)
MOST_FILES = 10_000
MOST_ASSETS = 10_000
LATEST_EVENTS = 3  # per asset on the assets page


def _files(engine: Engine) -> dict:
    files = views.dag_files(queries.parse_statuses(engine, limit=MOST_FILES),
                            queries.import_errors(engine, limit=MOST_FILES))
    return {"files": files, "failed": sum(row["state"] == "failed" for row in files)}


@system_pages.get("/dag-files")
def dag_files_page(request: Request, _user: Principal = Depends(page_user),
                   engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "dag_files.html", **_files(engine), section="files")


@system_pages.get("/import-errors")
def import_errors_page() -> Response:
    return RedirectResponse("/dag-files", status_code=307)


@system_pages.get("/ui/live/dag-files")
def live_dag_files(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_dag_files.html", _files(engine))


def _cluster(request: Request, engine: Engine) -> dict:
    """Schedulers (partitions owned, liveness) and executors as GET /api/v1/schedulers and /executors read them."""
    settings, now = request.app.state.settings, time.time()
    schedulers = queries.schedulers(engine, now=now, silence_limit=queries.scheduler_silence_limit(settings),
                                    limit=10_000)
    worker_limit = silence_limit(settings.task_heartbeat_seconds)
    executors = read_executor_status(engine, now=now, limit=worker_limit, configured=settings.available_executors)
    for row in schedulers:
        row["look"] = views.liveness_look(row["state"])
        row["age"] = None if row["last_heartbeat"] is None else max(now - row["last_heartbeat"], 0.0)
    for executor in executors:
        for worker in executor["workers"]:
            worker["look"] = views.liveness_look(worker["state"])
    return {"schedulers": schedulers, "executors": executors, "now": now}


@system_pages.get("/cluster")
def cluster_page(request: Request, _user: Principal = Depends(page_user),
                 engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "cluster.html", **_cluster(request, engine), section="cluster")


@system_pages.get("/ui/live/cluster")
def live_cluster(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_cluster.html", _cluster(request, engine))


@system_pages.get("/pools")
def pools_page(request: Request, _user: Principal = Depends(page_user),
               engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "pools.html", pools=queries.pools(engine, limit=MOST_FILES), section="pools")


@system_pages.get("/ui/live/pools")
def live_pools(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_pools.html", {"pools": queries.pools(engine, limit=MOST_FILES)})


def _assets(engine: Engine) -> dict:
    assets = queries.assets(engine, limit=MOST_ASSETS)
    latest = queries.latest_asset_events(engine, [row["uri"] for row in assets], LATEST_EVENTS)
    return {"assets": [{**row, "latest": latest[row["uri"]]} for row in assets]}


@system_pages.get("/assets")
def assets_page(request: Request, _user: Principal = Depends(page_user),
                engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "assets.html", **_assets(engine), section="assets")


@system_pages.get("/ui/live/assets")
def live_assets(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_assets.html", _assets(engine))
