"""Actions from the pages: each shows a confirmation form first, then runs the API's own command function.

GET /actions/{action}?dag_id=..&run_id=..&task_id=.. asks; POST (with the CSRF token) does it
through services/api/commands.py or task_commands.py, so the checks, the event and its
``requested_by`` (the user) are the API's.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import Engine

from services.api import commands, models, task_commands
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.targets import Refused
from services.api.ui.web import form_user, page_user, render

actions = APIRouter(include_in_schema=False)

QUESTIONS = {
    "trigger": "Trigger a new run of {dag_id}?",
    "pause": "Pause {dag_id}? No new task of any of its runs starts.",
    "unpause": "Unpause {dag_id}?",
    "clear": "Clear {task_id} of run {run_id}: run it again with a new try?",
    "mark": "Mark {task_id} of run {run_id} by hand?",
}


def _target(dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id}


def _back(target: dict[str, str]) -> str:
    if target["task_id"]:
        return f"/dags/{quote(target['dag_id'])}/runs/{quote(target['run_id'])}/tasks/{quote(target['task_id'])}"
    return f"/dags/{quote(target['dag_id'])}"


@actions.get("/actions/{action}")
def confirm(action: str, request: Request, dag_id: str, run_id: str = "", task_id: str = "",
            _user: Principal = Depends(page_user)) -> Response:
    if action not in QUESTIONS:
        raise HTTPException(status_code=404, detail=f"no action {action}")
    target = _target(dag_id, run_id, task_id)
    return render(request, "confirm.html", action=action, question=QUESTIONS[action].format(**target),
                  target=target, back=_back(target))


@actions.post("/actions/{action}")
def act(action: str, request: Request, dag_id: str = Form(...), run_id: str = Form(""), task_id: str = Form(""),
        csrf: str = Form(""), conf: str = Form("{}"), state: str = Form("success"), downstream: bool = Form(False),
        engine: Engine = Depends(engine_of)) -> Response:
    form_user(request, csrf, "operator")
    target = _target(dag_id, run_id, task_id)
    try:
        answer = _run(action, request, engine, target, conf=conf, state=state, downstream=downstream)
    except (Refused, HTTPException, ValueError) as error:
        detail = getattr(error, "reason", None) or getattr(error, "detail", None) or str(error)
        return render(request, "confirm.html", status_code=409, action=action, target=target, back=_back(target),
                      question=QUESTIONS.get(action, action).format(**target), error=detail)
    return RedirectResponse(f"{_back(target)}?done={quote(answer['command'])}", status_code=303)


def _run(action: str, request: Request, engine: Engine, target: dict[str, str], *, conf: str, state: str,
         downstream: bool) -> dict:
    request_id = uuid.uuid4().hex
    dag_id, run_id, task_id = target["dag_id"], target["run_id"], target["task_id"]
    match action:
        case "trigger":
            body = models.TriggerRequest(conf=json.loads(conf or "{}"))
            return commands.trigger(dag_id, body, request, request_id, engine)
        case "pause":
            return commands.pause(dag_id, request, request_id, engine)
        case "unpause":
            return commands.unpause(dag_id, request, request_id, engine)
        case "clear":
            return task_commands.clear(dag_id, run_id, task_id, request, models.ClearRequest(downstream=downstream),
                                       request_id, engine)
        case "mark":
            return task_commands.mark(dag_id, run_id, task_id, models.MarkRequest(state=state), request,
                                      request_id, engine)
    raise HTTPException(status_code=404, detail=f"no action {action}")
