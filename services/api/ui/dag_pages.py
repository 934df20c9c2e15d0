"""A DAG's Graph and Runs tabs (the Grid tab is in pages.py)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy import Engine

from projections import queries
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.core import graph, graph_view, group_graph, views
from services.api.core.group_graph import GroupedLayout
from services.api.ui.web import known_dag, live, page_user, render

dag_pages = APIRouter(include_in_schema=False)
RUNS_PAGE = 50


def _graph(engine: Engine, dag_id: str, collapsed_text: str = "") -> dict:
    """The DAG's task graph, each box in the state of its task in the latest run; the task groups named in
    ``collapsed_text`` (comma-separated) drawn as one box each."""
    dag = known_dag(engine, dag_id)
    latest = queries.runs(engine, dag_id=dag_id, limit=1)
    run_ids = [run["run_id"] for run in latest]
    cells = views.cells_by_instance(queries.instances_of_runs(engine, dag_id, run_ids))
    states = {task_id: row for (_run_id, task_id), row in cells.items()}
    tasks, groups = dag["tasks"] or [], dag.get("task_groups") or []
    collapsed = graph_view.collapsed_groups(collapsed_text, [group["group_id"] for group in groups])
    result, problem = _laid_out(tasks, groups, collapsed)
    return {"dag": dag, "layout": result, **graph_view.graph_view(result, tasks, groups, states, collapsed),
            "problem": problem, "collapsed": ",".join(sorted(collapsed)),
            "run": {**latest[0], "look": views.state_look(latest[0]["state"])} if latest else None}


def _laid_out(tasks: list[dict], groups: list[dict], collapsed: frozenset[str]) -> tuple[GroupedLayout, str]:
    try:
        return group_graph.grouped_layout(tasks, groups, collapsed), ""
    except graph.CyclicGraph as error:
        if not groups:
            return group_graph.grouped_layout([], []), str(error)
    try:  # the groups form a cycle (a task outside a group between two of its tasks): draw the tasks alone
        return group_graph.grouped_layout(tasks, []), ("The task groups are not drawn: a task outside a group "
                                                       "sits between two of its tasks.")
    except graph.CyclicGraph as error:
        return group_graph.grouped_layout([], []), str(error)


@dag_pages.get("/dags/{dag_id}/graph")
def graph_page(dag_id: str, request: Request, collapsed: str = Query("", max_length=4000),
               _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "graph.html", **_graph(engine, dag_id, collapsed), tab="graph")


@dag_pages.get("/ui/live/dags/{dag_id}/graph")
def live_graph(dag_id: str, request: Request, collapsed: str = Query("", max_length=4000),
               _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_graph.html", _graph(engine, dag_id, collapsed))


def _runs(engine: Engine, dag_id: str, offset: int) -> dict:
    dag = known_dag(engine, dag_id)
    runs = queries.runs(engine, dag_id=dag_id, limit=RUNS_PAGE + 1, offset=offset)
    return {"dag": dag, "runs": views.run_rows(runs[:RUNS_PAGE], time.time()), "offset": offset,
            "older": offset + RUNS_PAGE if len(runs) > RUNS_PAGE else None,
            "newer": max(offset - RUNS_PAGE, 0) if offset else None}


@dag_pages.get("/dags/{dag_id}/runs")
def runs_page(dag_id: str, request: Request, offset: int = Query(0, ge=0, le=2**31 - 1),
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)) -> Response:
    return render(request, "runs.html", **_runs(engine, dag_id, offset), tab="runs")


@dag_pages.get("/ui/live/dags/{dag_id}/runs")
def live_runs(dag_id: str, request: Request, offset: int = Query(0, ge=0, le=2**31 - 1),
              _user: Principal = Depends(page_user), engine: Engine = Depends(engine_of)):
    return live(request, "_runs.html", _runs(engine, dag_id, offset))
