"""Actions from the pages: each shows a confirmation form first, then runs the API's own command function.

GET /actions/{action}?dag_id=..&run_id=..&task_id=.. asks; POST (with the CSRF token) does it
through services/api/commands.py, task_commands.py or backfills.py, so the checks, the event and
its ``requested_by`` (the user) are the API's. The confirmation form carries the command's request
id, chosen when the form is shown: posting it again (a retry after a 503, a double click, a reload)
is the same command, applied once.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import Engine

from projections import queries
from schemas.params import ParamSpec, specs
from services.api import backfills, commands, models, task_commands
from services.api.auth import Principal
from services.api.commands import engine_of
from services.api.core import trigger_form
from services.api.params import MAP_INDEX, MAP_INDEX_FIELD
from services.api.targets import INVALID, Refused, check_request_id, parse_instant
from services.api.ui.web import form_user, page_user, render

actions = APIRouter(include_in_schema=False)

QUESTIONS = {
    "trigger": "Trigger a new run of {dag_id}?",
    "pause": "Pause {dag_id}? No new task of any of its runs starts.",
    "unpause": "Unpause {dag_id}?",
    "clear": "Clear {task_id} of run {run_id}: run it again with a new try?",
    "mark": "Mark {task_id} of run {run_id} by hand?",
    "backfill": "Backfill {dag_id}: a run for every schedule interval whose logical date is in the range?",
}


@dataclass(frozen=True)
class ActionForm:
    """What a confirmation form posts besides its target (each action reads its own fields)."""

    conf: str = "{}"
    state: str = "success"
    downstream: bool = False
    start_date: str = ""
    end_date: str = ""
    reprocess_failed: bool = False
    request_id: str = ""  # chosen when the form was shown; "" (a form of an older page): a new one
    logical_date: str = ""  # a trigger's: ISO 8601 or seconds; "" = now
    params: dict[str, str] = dataclasses.field(default_factory=dict)  # a trigger's param inputs, as posted


async def action_form(request: Request, conf: str = Form("{}", max_length=100_000),
                      state: str = Form("success", max_length=20), downstream: bool = Form(False),
                      start_date: str = Form("", max_length=40), end_date: str = Form("", max_length=40),
                      reprocess_failed: bool = Form(False), request_id: str = Form("", max_length=128),
                      logical_date: str = Form("", max_length=40)) -> ActionForm:
    posted = await request.form()  # (read once: FastAPI has parsed this body already, and keeps it)
    params = {key: value for key, value in posted.items()
              if key.startswith(trigger_form.PREFIX) and isinstance(value, str)}
    return ActionForm(conf, state, downstream, start_date, end_date, reprocess_failed, request_id, logical_date,
                      params)


def _target(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, str]:
    """What an action names (posted back as hidden inputs): a DAG, a run, a task, instance N of a mapped task."""
    target = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id}
    return target if map_index < 0 else {**target, "map_index": str(map_index)}


def _map_index(target: dict[str, str]) -> int:
    return int(target.get("map_index", -1))


def _question(action: str, target: dict[str, str]) -> str:
    named = target["task_id"] + (f"[{target['map_index']}]" if "map_index" in target else "")
    return QUESTIONS.get(action, action).format(**{**target, "task_id": named})


def _back(target: dict[str, str]) -> str:
    if target["task_id"]:
        index = f"?map_index={target['map_index']}" if "map_index" in target else ""
        return (f"/dags/{quote(target['dag_id'])}/runs/{quote(target['run_id'])}/tasks/{quote(target['task_id'])}"
                + index)
    return f"/dags/{quote(target['dag_id'])}"


@actions.get("/actions/{action}")
def confirm(action: str, request: Request, dag_id: str, run_id: str = "", task_id: str = "",
            map_index: int = MAP_INDEX, _user: Principal = Depends(page_user),
            engine: Engine = Depends(engine_of)) -> Response:
    if action not in QUESTIONS:
        raise HTTPException(status_code=404, detail=f"no action {action}")
    target = _target(dag_id, run_id, task_id, map_index)
    return render(request, "confirm.html", action=action, question=_question(action, target),
                  target=target, back=_back(target), form=ActionForm(request_id=uuid.uuid4().hex),
                  fields=_param_fields(engine, action, dag_id, None, {}))


def _param_specs(engine: Engine, dag_id: str) -> list[ParamSpec]:
    dag = queries.dag(engine, dag_id)
    return specs(json.dumps(dag.get("params") or [])) if dag is not None else []


def _param_fields(engine: Engine, action: str, dag_id: str, posted: dict[str, str] | None,
                  problems: dict[str, list[str]]) -> list[trigger_form.FormField]:
    """The trigger form's inputs for the DAG's params (none for other actions)."""
    if action != "trigger":
        return []
    return trigger_form.fields(_param_specs(engine, dag_id), posted, problems)


@actions.post("/actions/{action}")
def act(action: str, request: Request, dag_id: str = Form(...), run_id: str = Form(""), task_id: str = Form(""),
        map_index: int = MAP_INDEX_FIELD, csrf: str = Form(""), form: ActionForm = Depends(action_form),
        engine: Engine = Depends(engine_of)) -> Response:
    form_user(request, csrf, "operator")
    target = _target(dag_id, run_id, task_id, map_index)
    form = dataclasses.replace(form, request_id=form.request_id or uuid.uuid4().hex)
    try:
        check_request_id(form.request_id)
        answer = _run(action, request, engine, target, form)
    except (Refused, HTTPException, ValueError) as error:
        detail = getattr(error, "reason", None) or getattr(error, "detail", None) or str(error)
        status = 503 if getattr(error, "status_code", None) == 503 else 409  # 503: not lost, retry
        # The same request id again: confirming once more retries the same command. Every input holds
        # what was posted, with the params' rules it breaks beside it.
        problems = _form_problems(engine, dag_id, form) if action == "trigger" else {}
        fields = _param_fields(engine, action, dag_id, form.params, problems)
        return render(request, "confirm.html", status_code=status, action=action, target=target,
                      back=_back(target), question=_question(action, target), error=detail,
                      form=form, fields=fields)
    back = _back(target)
    return RedirectResponse(f"{back}{'&' if '?' in back else '?'}done={quote(answer['command'])}", status_code=303)


def _run(action: str, request: Request, engine: Engine, target: dict[str, str], form: ActionForm) -> dict:
    request_id = form.request_id
    dag_id, run_id, task_id = target["dag_id"], target["run_id"], target["task_id"]
    match action:
        case "trigger":
            return commands.trigger(dag_id, _trigger_request(engine, dag_id, form), request, request_id, engine)
        case "pause":
            return commands.pause(dag_id, request, request_id, engine)
        case "unpause":
            return commands.unpause(dag_id, request, request_id, engine)
        case "clear":
            body = models.ClearRequest(downstream=form.downstream)
            return task_commands.clear(dag_id, run_id, task_id, request, body, _map_index(target), request_id,
                                       engine)
        case "mark":
            return task_commands.mark(dag_id, run_id, task_id, models.MarkRequest(state=form.state), request,
                                      _map_index(target), request_id, engine)
        case "backfill":
            body = models.BackfillRequest(start_date=form.start_date, end_date=form.end_date,
                                          reprocess_failed=form.reprocess_failed, conf=json.loads(form.conf or "{}"))
            return backfills.request_backfill(dag_id, body, request, request_id, engine)
    raise HTTPException(status_code=404, detail=f"no action {action}")


def _trigger_request(engine: Engine, dag_id: str, form: ActionForm) -> models.TriggerRequest:
    """The API's trigger body from the form: the params' inputs, the raw conf over them, the logical date."""
    conf, unreadable = trigger_form.conf_from(_param_specs(engine, dag_id), form.params, form.conf)
    if unreadable:
        raise Refused(INVALID, "; ".join(f"param {name!r}: {problem}" if name else problem
                                         for name, problems in unreadable.items() for problem in problems))
    try:
        logical = parse_instant(form.logical_date) if form.logical_date.strip() else None
        return models.TriggerRequest(conf=conf, logical_date=logical)
    except ValidationError as error:
        raise Refused(INVALID, "; ".join(str(problem["msg"]) for problem in error.errors())) from None
    except ValueError as error:
        raise Refused(INVALID, f"logical date: {error}") from None


def _form_problems(engine: Engine, dag_id: str, form: ActionForm) -> dict[str, list[str]]:
    """By param name, what is wrong with a posted trigger form's inputs."""
    params = _param_specs(engine, dag_id)
    conf, unreadable = trigger_form.conf_from(params, form.params, form.conf)
    found = trigger_form.problems_by_param(params, conf)
    for name, problems in unreadable.items():
        found[name] = problems  # (a text that is not JSON: the schema's complaint about it says less)
    return found
