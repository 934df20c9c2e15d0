"""What a command names, checked against the tables before it is appended (API and CLI alike).

A command on an unknown DAG or run is refused as *unknown* (HTTP 404, CLI exit 1); one that
cannot be carried out (a task the DAG does not define, a state one cannot mark, a backfill of a
DAG without a schedule) as *impossible* (HTTP 409, CLI exit 1), with the reason. A DAG's tasks
come from its definition in the ``dag`` table: a task that has not been queued yet has no
``task_instance`` row and can still be cleared or marked.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from projections import queries
from schemas import params as param_rules
from schemas import schedule as cron

UNKNOWN, IMPOSSIBLE, INVALID = 404, 409, 422
MARKABLE = ("success", "failed", "skipped")
KILLABLE = ("queued", "running")
# A request id becomes part of run ids (manual__<id>) and log file paths: plain characters only.
REQUEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$"
_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)
Row = dict[str, Any]


class Refused(Exception):
    """A command that is not appended: ``status`` UNKNOWN (404) or IMPOSSIBLE (409), and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class TaskTarget:
    """A task instance a command names: its DAG and run rows, and its own row when it has one."""

    dag: Row
    run: Row
    instance: Row | None


def known_dag(engine: Engine, dag_id: str, *, active: bool = False) -> Row:
    """The DAG's row; with ``active``, refused when no DAG file defines it any more."""
    dag = queries.dag(engine, dag_id)
    if dag is None or dag["parsed_at"] is None:
        raise Refused(UNKNOWN, f"no DAG {dag_id} (has the DAG processor parsed it? see `tock dags list`)")
    if active and not dag["is_active"]:
        raise Refused(IMPOSSIBLE, f"DAG {dag_id} was deleted: no DAG file defines it any more")
    return dag


def known_run(engine: Engine, dag_id: str, run_id: str, *, active: bool = False) -> tuple[Row, Row]:
    """(the DAG's row, the run's row)."""
    dag = known_dag(engine, dag_id, active=active)
    run = queries.run(engine, dag_id, run_id)
    if run is None:
        raise Refused(UNKNOWN, f"no run {run_id} of DAG {dag_id} (see `tock runs list {dag_id}`)")
    return dag, run


def known_task(engine: Engine, dag_id: str, run_id: str, task_id: str, *, active: bool = True,
               map_index: int = -1) -> TaskTarget:
    """The task instance a command names (``map_index``: instance N of a mapped task); its task must be
    in the DAG's current definition."""
    dag, run = known_run(engine, dag_id, run_id, active=active)
    if task_id not in task_ids(dag):
        raise Refused(IMPOSSIBLE, f"DAG {dag_id} has no task {task_id} (its tasks: {', '.join(task_ids(dag))})")
    if map_index >= 0 and not _maybe_mapped(dag, task_id):
        raise Refused(IMPOSSIBLE, f"task {task_id} of DAG {dag_id} is not mapped: it has no map index {map_index}")
    return TaskTarget(dag, run, queries.task_instance(engine, dag_id, run_id, task_id, map_index))


def _maybe_mapped(dag: Row, task_id: str) -> bool:
    """Whether the DAG's current definition maps the task (a row projected before it said: yes)."""
    return next((task.get("mapped", True) for task in dag.get("tasks") or [] if task["task_id"] == task_id), True)


def task_ids(dag: Row) -> list[str]:
    """The task ids of a DAG row's current definition."""
    return [task["task_id"] for task in dag.get("tasks") or []]


def markable(state: str) -> str:
    if state not in MARKABLE:
        raise Refused(IMPOSSIBLE, f"cannot mark a task {state!r}: the state must be one of {', '.join(MARKABLE)}")
    return state


def killable(target: TaskTarget, task_id: str) -> None:
    """A kill needs a try that has not ended: queued or running."""
    state = target.instance["state"] if target.instance else None
    if state not in KILLABLE:
        raise Refused(IMPOSSIBLE, f"task {task_id} has no try to kill (its state is {state or 'not queued yet'})")


def backfill_range(dag: Row, start: float, end: float) -> None:
    """A backfill needs a DAG with schedule intervals and a range that does not end before it starts."""
    if not dag["schedule"] or dag["schedule"] == "@once":
        raise Refused(IMPOSSIBLE, f"DAG {dag['dag_id']} has no schedule intervals to backfill "
                                  f"(schedule {dag['schedule']!r}); trigger runs instead")
    if end < start:
        raise Refused(IMPOSSIBLE, f"the backfill ends ({iso(end)}) before it starts ({iso(start)})")
    _plannable(dag["schedule"], start, end, dag.get("timezone") or cron.UTC_NAME)


def _plannable(schedule: str, start: float, end: float, timezone: str) -> None:
    """Refuse (422) a range whose fire times the scheduler could not compute. Planning walks the fire
    times from ``start`` (core/backfill.py ``fire_times``), so its first and its last step are the ones
    that can leave the calendar (schemas/schedule.py ``plannable``, the scheduler's rule too)."""
    _zone_known(timezone)
    if not cron.plannable(schedule, start, end, timezone):
        raise Refused(INVALID, f"the schedule {schedule!r} cannot be planned from {iso(start)} to {iso(end)}: "
                               "its next fire time is past the year 9999 or cannot be computed; "
                               "end the backfill earlier")


def _zone_known(timezone: str) -> None:
    """Refuse (409) a backfill of a DAG whose time zone this host's zoneinfo does not know (its fire
    times cannot be computed here; the scheduler quarantines such a DAG)."""
    try:
        cron.zone_of(timezone)
    except ValueError as error:
        raise Refused(IMPOSSIBLE, f"{error}: update the host's tzdata, or give the DAG a known zone") from None


def conf_text(conf: dict[str, Any], limit: int) -> str:
    """A command's conf as the JSON text its event carries; refused (422) beyond ``limit`` bytes, so the
    record fits in one Kafka message (the broker's default limit is 1 MB)."""
    text = json.dumps(conf, sort_keys=True)
    size = len(text.encode())
    if size > limit:
        raise Refused(INVALID, f"the conf is {size} bytes as JSON; at most {limit} bytes are taken "
                               "(TOCK_API_CONF_LIMIT_BYTES): pass large inputs by reference (a path, a URL)")
    return text


def conf_fits(dag: Row, conf: dict[str, Any]) -> None:
    """Refuse (422) a conf the DAG's params refuse, naming each param and the rule it breaks (the
    scheduler's rule too: schemas/params.py)."""
    problems = param_rules.problems(json.dumps(dag.get("params") or []), json.dumps(conf))
    if problems:
        raise Refused(INVALID, f"the conf does not fit the params of DAG {dag['dag_id']}: " + "; ".join(problems))


def check_request_id(request_id: str) -> str:
    if not _REQUEST_ID.match(request_id):
        raise ValueError(f"bad request id {request_id!r}: 1 to 128 characters of letters, digits and ._~- "
                         "(starting with a letter or digit)")
    return request_id


def reused_for_another(engine: Engine, request_id: str, command: str, dag_id: str, run_id: str | None,
                       task_id: str | None) -> None:
    """Refuse a request id the log already holds for a different command (a key is one command)."""
    for row in queries.commands(engine, request_id):
        if (row["command"], row["dag_id"], row["run_id"], row["task_id"]) != (command, dag_id, run_id, task_id):
            raise Refused(IMPOSSIBLE, f"request id {request_id} was already used for {row['command']} on "
                                      f"{'/'.join(filter(None, (row['dag_id'], row['run_id'], row['task_id'])))}")


def parse_instant(text: str | float | int) -> float:
    """Seconds since the epoch from ISO 8601 (a date, or a date and time; UTC unless it names an offset)
    or from a number of seconds, between the years 1970 and 9998. Raises ValueError naming the problem."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return bounded_instant(text)
    try:
        parsed = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise ValueError(f"not an ISO 8601 date or date-time: {text!r} (e.g. 2024-01-31 or "
                         "2024-01-31T06:00:00+00:00)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        seconds = parsed.timestamp()
    except (OverflowError, ValueError, OSError):
        seconds = math.nan
    if not _FIRST <= seconds < _END:
        raise ValueError(f"{text!r} is {_RANGE}")
    return seconds


def bounded_instant(seconds: float) -> float:
    """``seconds`` since the epoch if they are a date the scheduler's calendar arithmetic handles (the
    years 1970 to 9998, so the fire time after any of them is still a date); else ValueError."""
    if not _FIRST <= seconds < _END:  # NaN fails every comparison
        raise ValueError(f"{seconds!r} seconds since the epoch is {_RANGE}")
    return float(seconds)


EARLIEST_YEAR, LATEST_YEAR = 1970, 9998
_FIRST = dt.datetime(EARLIEST_YEAR, 1, 1, tzinfo=dt.UTC).timestamp()
_END = dt.datetime(LATEST_YEAR + 1, 1, 1, tzinfo=dt.UTC).timestamp()
_RANGE = (f"not a date between the years {EARLIEST_YEAR} and {LATEST_YEAR} (the dates the scheduler computes "
          "schedules with)")


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()
