"""The pages: DAGs, a DAG's grid, a task instance; and the small JSON the pages poll every second.

Polling (not server-sent events): each poll is one short read of the tables, works through any
proxy, needs no connection per open page on the server, and a state change shows within a
second of the projector committing it.
"""

from __future__ import annotations

import hashlib
import time

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine

from projections import queries
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.logs import log_response
from services.api.task_logs import TryRef, shipped_texts, try_start
from services.api.ui import views
from services.api.ui.web import page_user, render, templates

pages = APIRouter(include_in_schema=False)
GRID_RUNS = 25
DOTS = 8


def _dags(engine: Engine) -> list[dict]:
    dags = [dag for dag in queries.dags(engine, limit=1000) if dag["is_active"]]
    for dag in dags:
        dag["dots"] = [{"run_id": run["run_id"], **views.state_look(run["state"])}
                       for run in reversed(queries.runs(engine, dag_id=dag["dag_id"], limit=DOTS))]
    return dags


def _grid(engine: Engine, dag_id: str) -> dict:
    dag = queries.dag(engine, dag_id)
    if dag is None:
        raise HTTPException(status_code=404, detail=f"no DAG {dag_id}")
    runs = queries.runs(engine, dag_id=dag_id, limit=GRID_RUNS)
    instances = queries.instances_of_runs(engine, dag_id, [run["run_id"] for run in runs])
    return {"dag": dag, "grid": views.grid(dag["tasks"] or [], runs, instances)}


def _task(engine: Engine, dag_id: str, run_id: str, task_id: str) -> dict:
    instance = queries.task_instance(engine, dag_id, run_id, task_id)
    history = queries.task_history(engine, dag_id, run_id, task_id, limit=10_000)
    if instance is None and not history:
        raise HTTPException(status_code=404, detail=f"no task instance {task_id} of run {run_id}")
    look = views.state_look(instance["state"] if instance else None)
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "instance": instance, "look": look,
            "timeline": views.timeline(history)}


def _live(request: Request, template: str, context: dict) -> JSONResponse:
    html = templates.get_template(template).render({"request": request, **context})
    return JSONResponse({"html": html, "version": hashlib.sha256(html.encode()).hexdigest()[:16]})


@pages.get("/")
def dags_page(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "dags.html", dags=_dags(engine), import_errors=queries.import_errors(engine, limit=50),
                  done=request.query_params.get("done"))


@pages.get("/dags/{dag_id}")
def grid_page(dag_id: str, request: Request, _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "grid.html", **_grid(engine, dag_id), done=request.query_params.get("done"))


@pages.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def task_page(dag_id: str, run_id: str, task_id: str, request: Request, _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)) -> Response:
    context = _task(engine, dag_id, run_id, task_id)
    return render(request, "task.html", **context, log=_log(request, engine, context),
                  done=request.query_params.get("done"))


def _log(request: Request, engine: Engine, context: dict) -> str:
    instance = context["instance"]
    if instance is None or instance["try_number"] is None:
        return ""
    try_ref = TryRef(context["dag_id"], context["run_id"], context["task_id"], instance["try_number"])
    since = try_start(engine, try_ref, instance)
    return "".join(text for batch in shipped_texts(request.app.state.settings, try_ref, since) for text in batch.texts)


@pages.get("/ui/log/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def follow_log(dag_id: str, run_id: str, task_id: str, request: Request,
               try_number: int | None = Query(None, alias="try", ge=1), _user: Principal = Depends(page_user),
               engine: Engine = Depends(engine_of)) -> Response:
    """The task page's live log: the API's log stream (whole, then followed until the try ends)
    with the session's login, read by ui.js as it arrives: one Kafka reader per open page."""
    return log_response(request, engine, dag_id, run_id, task_id, try_number, follow=True)


@pages.get("/ui/live/dags")
def live_dags(request: Request, _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return _live(request, "_dags.html", {"dags": _dags(engine), "csrf": ""})


@pages.get("/ui/live/dags/{dag_id}/grid")
def live_grid(dag_id: str, request: Request, _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)):
    return _live(request, "_grid.html", _grid(engine, dag_id))


@pages.get("/ui/live/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def live_task(dag_id: str, run_id: str, task_id: str, request: Request, _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)):
    return _live(request, "_timeline.html", _task(engine, dag_id, run_id, task_id))
