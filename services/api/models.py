"""Response models of the API, derived from the projection tables so the two cannot drift."""

from __future__ import annotations

import json
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model

from projections.tables import LIVE, TASK_EVENT
from services.api.targets import parse_instant

T = TypeVar("T")


def _model_of(table_name: str, model_name: str) -> type[BaseModel]:
    """One optional field per column; ``x_json`` text columns become decoded ``x`` fields."""
    fields: dict[str, Any] = {}
    for column in LIVE[table_name].columns:
        if column.name.endswith("_json"):
            fields[column.name[:-5]] = (Any, None)
        else:
            fields[column.name] = (column.type.python_type | None, None)
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)


_INTERVAL_DOC = ("the data interval's start: a scheduled or backfill run's previous fire time in the DAG's "
                 "time zone (never before its start date); a manual run's logical date (empty interval)")


class TaskGroup(BaseModel):
    """A task group of a DAG: its full id, the group it is in ("" the DAG) and its tooltip."""

    model_config = ConfigDict(extra="forbid")
    group_id: str
    parent_id: str = ""
    tooltip: str = ""


Dag = create_model("Dag", __base__=_model_of("dag", "DagRow"),
                   task_groups=(list[TaskGroup] | None, Field(None, description="its task groups, nested by "
                                                                                "parent_id")))
DagRun = create_model("DagRun", __base__=_model_of("dag_run", "DagRunRow"),
                      duration=(float | None, Field(None, description="seconds from the run's creation to its "
                                                                      "(latest) end; null while it runs")),
                      data_interval_start=(float | None, Field(None, description=_INTERVAL_DOC)),
                      data_interval_end=(float | None, Field(None, description="the data interval's end: the "
                                                                               "logical date")))
_REASON_DOC = "why it did not run (a skip, an upstream failure, a skipped try, a removal), in words"
_RULE_DOC = "the trigger rule that decided a skip or an upstream failure"
_STATES_DOC = "the upstream tasks' states that decision read (task id -> state)"
_CHOSEN_DOC = "the branch or short circuit that did not choose this task (a skip)"
_FOLLOW_DOC = ("the downstream task ids a branch or short circuit chose ([] none); null for a task that "
               "does not choose")
_DECISION = {"reason": (str | None, Field(None, description=_REASON_DOC)),
             "trigger_rule": (str | None, Field(None, description=_RULE_DOC)),
             "upstream_states": (dict[str, str] | None, Field(None, description=_STATES_DOC)),
             "chosen_by": (str | None, Field(None, description=_CHOSEN_DOC)),
             "follow": (list[str] | None, Field(None, description=_FOLLOW_DOC))}
_SHAPE = {"task_group": (str | None, Field(None, description='the id of the innermost task group its task is in '
                                                             '("" none; null: the task is no longer defined)')),
          "is_setup": (bool | None, Field(None, description="its task is a setup task")),
          "is_teardown": (bool | None, Field(None, description="its task is a teardown task"))}
TaskInstance = create_model(
    "TaskInstance", __base__=_model_of("task_instance", "TaskInstanceRow"), **_SHAPE, **{
        **_DECISION, "trigger_rule": (str | None, Field(None, description=_RULE_DOC + "; for any other instance, "
                                                                      "its task's rule in the current definition"))})
TaskEvent = create_model(
    "TaskEvent", __base__=_model_of(TASK_EVENT, "TaskEventRow"), **_DECISION,
    why=(str, Field("", description="what the event decided, in words: the reason, trigger rule, upstream "
                                    'states and branch of a skip or upstream failure, what a branch followed ("" '
                                    "for an event that decides nothing)")))
ImportError_ = _model_of("import_error", "ImportError")
ParseStatus = _model_of("parse_status", "ParseStatus")
Scheduler = _model_of("scheduler", "Scheduler")
Command = _model_of("command", "Command")
Backfill = create_model("Backfill", __base__=_model_of("backfill", "BackfillRow"),
                        created=(int, Field(0, description="runs of its planned dates created (or reopened) so far")),
                        finished=(int, Field(0, description="of those, runs that have ended")))


class Page(BaseModel, Generic[T]):
    """One page of a list: the items, and the paging that produced them."""

    items: list[T]
    limit: int
    offset: int


class TaskHistoryPage(Page[TaskEvent]):
    """One page of a task instance's events, with its task's shape in the DAG's current definition."""

    task_group: str | None = Field(None, description=_SHAPE["task_group"][1].description)
    is_setup: bool | None = None
    is_teardown: bool | None = None
    trigger_rule: str | None = Field(None, description="its task's trigger rule in the DAG's current definition")


def _finite_json(conf: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(conf, allow_nan=False)
    except ValueError:
        raise ValueError("numbers in a conf must be finite: NaN and Infinity are not JSON") from None
    return conf


def _date(value: str | float) -> str | float:
    parse_instant(value)  # raises ValueError naming the problem
    return value


def _instant(value: Any) -> Any:
    """A logical date given as ISO 8601 text or as seconds, as seconds (None stays None)."""
    return value if value is None else parse_instant(value)


Conf = Annotated[dict[str, Any], AfterValidator(_finite_json)]
InstantOrDate = Annotated[str | float, AfterValidator(_date)]
CONF_DOC = " (at most TOCK_API_CONF_LIMIT_BYTES as JSON; finite numbers)"
DATE_DOC = "; between the years 1970 and 9998"


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conf: Conf = Field(default_factory=dict, description="the run's conf (a JSON object)" + CONF_DOC)
    logical_date: Annotated[float, BeforeValidator(_instant)] | None = Field(
        default=None, description="ISO 8601 date or date-time (UTC unless it names an offset), or seconds since "
                                  "the epoch" + DATE_DOC + "; default: when the scheduler takes the trigger")


class ClearRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    downstream: bool = Field(default=False, description="also clear every task after this one")
    upstream: bool = Field(default=False, description="also clear every task before this one")
    recursive: bool = Field(default=False, description="an ExternalTaskMarker cleared also clears the task it "
                                                       "names in another DAG, and what follows it (Airflow's "
                                                       "Recursive)")


class MarkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: str = Field(description='"success", "failed" or "skipped" (another state is refused with 409)')


class BackfillRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start_date: InstantOrDate = Field(description="ISO 8601 date or date-time (UTC unless it names an offset), "
                                                  "or seconds since the epoch" + DATE_DOC + "; the first "
                                                  "logical date included")
    end_date: InstantOrDate = Field(description="the same; the last logical date included")
    reprocess_failed: bool = Field(default=False, description="also re-run dates whose run failed")
    conf: Conf = Field(default_factory=dict, description="conf of the runs it creates" + CONF_DOC)


class Accepted(BaseModel):
    """A command was appended to the log; the owning scheduler will decide it. The body depends only
    on the request (never on time), so repeating a request with its Idempotency-Key gets the same body."""

    command: str
    request_id: str = Field(description="the Idempotency-Key, or the one generated for this request")
    dag_id: str
    run_id: str | None = Field(default=None, description="the run it names (a trigger's: derived from request_id)")
    task_id: str | None = Field(default=None, description='the task it names ("" = every task of the run)')
    backfill_id: str | None = None
    topic: str
    status_url: str | None = Field(default=None, description="where the command's status is read "
                                                             "(None: pause and cancel are not tracked)")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: str
