"""Response models of the API, derived from the projection tables so the two cannot drift."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from projections.tables import LIVE, TASK_EVENT

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


Dag = _model_of("dag", "Dag")
DagRun = _model_of("dag_run", "DagRun")
TaskInstance = _model_of("task_instance", "TaskInstance")
TaskEvent = _model_of(TASK_EVENT, "TaskEvent")
ImportError_ = _model_of("import_error", "ImportError")
ParseStatus = _model_of("parse_status", "ParseStatus")
Scheduler = _model_of("scheduler", "Scheduler")


class Page(BaseModel, Generic[T]):
    """One page of a list: the items, and the paging that produced them."""

    items: list[T]
    limit: int
    offset: int


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conf: dict[str, Any] = Field(default_factory=dict, description="the run's conf (a JSON object)")
    logical_date: float | None = Field(default=None, description="seconds since the epoch; default: now")


class MarkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Literal["success", "failed"]


class Accepted(BaseModel):
    """A command was appended to the log; the owning scheduler will decide it."""

    command: str
    request_id: str | None = None
    topic: str


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: str
