"""The pages: DAGs, a DAG's grid, a task instance (the Graph and Runs tabs are in dag_pages.py, DAG files and
the cluster in system_pages.py); and the small JSON the pages poll every second.

Polling (not server-sent events): each poll is one short read of the tables, works through any
proxy, needs no connection per open page on the server, and a state change shows within a
second of the projector committing it.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from sqlalchemy import Engine

from projections import queries
from schemas.tasks import instance_name
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.core import dag_list, views
from services.api.logs import log_response
from services.api.params import MAP_INDEX, TRY
from services.api.task_logs import TryRef, shipped_texts, try_start
from services.api.ui.dag_pages import dag_pages
from services.api.ui.secret_pages import secret_pages
from services.api.ui.system_pages import system_pages
from services.api.ui.web import known_dag, live, page_user, render

pages = APIRouter(include_in_schema=False)
pages.include_router(dag_pages)
pages.include_router(system_pages)
pages.include_router(secret_pages)
GRID_RUNS, GRID_MOST_RUNS = 25, 100
DOTS = 8


def _dags(engine: Engine, wanted: dag_list.DagFilter) -> dict:
    dags = [dag for dag in queries.dags(engine, limit=100_000) if dag["is_active"]]
    recent = queries.latest_runs(engine, [dag["dag_id"] for dag in dags], DOTS)
    scheduled, now = queries.latest_scheduled_dates(engine), time.time()
    for dag in dags:
        dag["dots"] = [{"run_id": run["run_id"], **views.state_look(run["state"])}
                       for run in reversed(recent[dag["dag_id"]])]
        dag["next_run"] = dag_list.next_run(dag, scheduled.get(dag["dag_id"]), now)
    return {"dags": dag_list.filtered(dags, wanted), "tags": dag_list.all_tags(dags), "wanted": wanted,
            "total": len(dags)}


def _grid(engine: Engine, dag_id: str, shown: int = GRID_RUNS) -> dict:
    dag = known_dag(engine, dag_id)
    runs = queries.runs(engine, dag_id=dag_id, limit=shown)
    instances = queries.instances_of_runs(engine, dag_id, [run["run_id"] for run in runs])
    grid = views.grid(dag["tasks"] or [], runs, instances, dag_id, dag.get("task_groups") or [])
    return {"dag": dag, "grid": grid, "shown": shown}


def _task(engine: Engine, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict:
    """The task page's parts: the instance (``map_index`` N: instance N of a mapped task), its events, and
    for a mapped task as a whole the row of each of its instances."""
    instance = queries.task_instance(engine, dag_id, run_id, task_id, map_index)
    history = queries.task_history(engine, dag_id, run_id, task_id, limit=10_000,
                                   map_index=None if map_index < 0 else map_index)
    named = instance_name(task_id, map_index)
    if instance is None and not history:
        raise HTTPException(status_code=404, detail=f"no task instance {named} of run {run_id}")
    look = views.state_look(instance["state"] if instance else None)
    if instance is not None:
        instance = queries.with_task_shape(engine, dag_id, [instance])[0]
    mapped = map_index < 0 and queries.is_mapped_whole(instance)
    if mapped:  # the whole's page shows its own decisions; each instance's events are on its page
        history = [row for row in history if row["map_index"] < 0]
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index, "named": named,
            "instance": instance, "look": look, "timeline": views.timeline(history),
            "why": views.instance_why(instance),
            "instances": _mapped_instances(engine, dag_id, run_id, task_id) if mapped else []}


def _mapped_instances(engine: Engine, dag_id: str, run_id: str, task_id: str) -> list[dict]:
    """Each instance of a mapped task in the run, in map index order, with its state's look."""
    rows = queries.mapped_task_instances(engine, dag_id, run_id, task_id)
    return [{**row, "look": views.state_look(row["state"])} for row in rows]


def _wanted(search: str = Query("", max_length=200), tag: str = Query("", max_length=200),
            last: str = Query("", max_length=20), paused: str = Query("all", max_length=20)) -> dag_list.DagFilter:
    return dag_list.dag_filter(search, tag, last, paused)


@pages.get("/")
def dags_page(request: Request, wanted: dag_list.DagFilter = Depends(_wanted), _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "dags.html", **_dags(engine, wanted), last_states=dag_list.LAST_STATES,
                  import_errors=queries.import_errors(engine, limit=50), done=request.query_params.get("done"))


@pages.get("/dags/{dag_id}")
def grid_page(dag_id: str, request: Request, runs: int = Query(GRID_RUNS, ge=1, le=GRID_MOST_RUNS),
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "grid.html", **_grid(engine, dag_id, runs), tab="grid",
                  done=request.query_params.get("done"))


@pages.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def task_page(dag_id: str, run_id: str, task_id: str, request: Request, map_index: int = MAP_INDEX,
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    context = _task(engine, dag_id, run_id, task_id, map_index)
    return render(request, "task.html", **context, log=_log(request, engine, context),
                  done=request.query_params.get("done"))


def _log(request: Request, engine: Engine, context: dict) -> str:
    instance = context["instance"]
    if instance is None or instance["try_number"] is None:
        return ""
    try_ref = TryRef(context["dag_id"], context["run_id"], context["task_id"], instance["try_number"],
                     context["map_index"])
    since = try_start(engine, try_ref, instance)
    return "".join(text for batch in shipped_texts(request.app.state.settings, try_ref, since) for text in batch.texts)


@pages.get("/ui/log/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def follow_log(dag_id: str, run_id: str, task_id: str, request: Request,
               try_number: int | None = TRY, map_index: int = MAP_INDEX,
               _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    """The task page's live log: the API's log stream (whole, then followed until the try ends)
    with the session's login, read by ui.js as it arrives: one Kafka reader per open page."""
    return log_response(request, engine, TryRef(dag_id, run_id, task_id, try_number or 0, map_index), follow=True)


@pages.get("/ui/live/dags")
def live_dags(request: Request, wanted: dag_list.DagFilter = Depends(_wanted), _user: Principal = Depends(page_user),
              engine: Engine = Depends(engine_of)):
    return live(request, "_dags.html", {**_dags(engine, wanted), "csrf": ""})


@pages.get("/ui/live/dags/{dag_id}/grid")
def live_grid(dag_id: str, request: Request, runs: int = Query(GRID_RUNS, ge=1, le=GRID_MOST_RUNS),
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_grid.html", _grid(engine, dag_id, runs))


@pages.get("/ui/live/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def live_task(dag_id: str, run_id: str, task_id: str, request: Request, map_index: int = MAP_INDEX,
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_timeline.html", _task(engine, dag_id, run_id, task_id, map_index))
