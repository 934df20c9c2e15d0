"""``DAG``: a named graph of tasks with its schedule, used as a context manager in DAG files."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, date, datetime, time, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from schemas import schedule as cron
from schemas.dags import DagDefinition, TaskDefinition, TaskGroupDefinition
from schemas.pools import DEFAULT_POOL
from tock.assets import BaseAsset, outlets_of, schedule_condition
from tock.callbacks import DAG_CALLBACKS, callbacks_of
from tock.deadline import Deadline, deadline_of
from tock.mapping import definition_of
from tock.metadata import dag_metadata_problems, markdown_of
from tock.params import ParamsDict, definition_problems, params_of, to_params_json
from tock.tasks import ID_PATTERN, Task, TaskOptions, default_args_problem, defaults_for_kind, seconds_of
from tock.templating import TemplateOptions
from tock.trigger_rules import TriggerRule

if TYPE_CHECKING:
    from tock.task_group import TaskGroup

# Presets croniter understands, plus "@once" (one run at start_date).
SCHEDULE_PRESETS = ("@once", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually")

# A callable callback: dotted module path, colon, function name (same as infra/callables.py).
CALLBACK_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")

# Finished runs a DAG may ask the scheduler to keep: each costs the scheduler memory (a few KB).
MOST_RUNS_KEPT = 1_000_000

Computed = TypeVar("Computed")

_active: list[DAG] = []  # DAGs whose `with` block is open, innermost last
_collectors: list[list[DAG]] = []  # lists collecting the DAGs a file defines (see tock.loading)


class DagDefinitionError(ValueError):
    """A DAG is invalid; the message names the file, the DAG and the problem."""

    def __init__(self, file_path: str | None, dag_id: str, problem: str) -> None:
        super().__init__(f"{file_path or '<unknown file>'}: DAG {dag_id!r}: {problem}")
        self.file_path = file_path
        self.dag_id = dag_id
        self.problem = problem


def current_dag() -> DAG | None:
    """The DAG of the innermost open ``with DAG(...)`` block, if any."""
    return _active[-1] if _active else None


class DAG:
    """A DAG: ``with DAG("etl", schedule="@hourly") as dag: ...``.

    Durations (retry_delay, deadline) are seconds or timedeltas. The start_date's time zone is the
    DAG's (``zoneinfo.ZoneInfo`` or ``datetime.timezone``; naive: UTC): the schedule is read on its
    wall clock. No scheduled or backfill run has a logical date after ``end_date`` (naive: UTC).
    ``deadline`` counts from the run's start, or is a ``Deadline`` (e.g.
    ``Deadline.after_logical_date(timedelta(hours=1))``: scheduled runs count from their logical date).
    ``on_failure`` / ``on_deadline_missed``: webhook URLs `tock monitor` POSTs to when a run fails
    or misses its deadline, or ``"package.module:function"`` paths it calls (in a subprocess).
    ``on_success_callback`` / ``on_failure_callback`` (Airflow's): a function, or a list of them, called
    with the run's context when a run succeeds / fails (tock/callbacks.py). ``default_args``: task options
    (retries, queue, on_failure_callback...) for the DAG's tasks that do not set them (a task group's
    default_args come first).
    ``finished_runs_kept``: how many of its finished runs the scheduler keeps for clear, mark and
    backfill (older ones are forgotten); None: the installation's TOCK_SCHEDULER_FINISHED_RUNS_KEPT.
    Templating, as Airflow's (tock/templating.py): ``template_searchpath`` (folders searched for template
    files after the DAG file's own), ``template_undefined`` (default ``jinja2.StrictUndefined``: an
    undefined name fails the try), ``user_defined_macros``, ``user_defined_filters``,
    ``jinja_environment_kwargs`` and ``render_template_as_native_obj``.
    Limits, as Airflow's: ``max_active_tasks`` tries of the DAG queued or running at once across its runs
    (default 16, Airflow's core.max_active_tasks_per_dag); ``dagrun_timeout`` (seconds or a timedelta): a
    run still running that long after it started fails, its running tries killed and the rest skipped.
    ``default_args``: task options (retries, priority_weight, queue...) for every task of the DAG that does
    not set them (a task group's default_args go over the DAG's).
    What the UI shows, as Airflow's (tock/metadata.py): ``description``, ``doc_md`` (Markdown, or the name of a
    ``.md`` file beside the DAG file), ``owner_links`` (task owner -> an http(s) or mailto link) and
    ``dag_display_name`` (default: the dag_id).
    """

    def __init__(self, dag_id: str, schedule: str | BaseAsset | list[BaseAsset] | None = None,
                 start_date: datetime | date | None = None,
                 catchup: bool = False, max_active_runs: int = 16, retries: int = 0,
                 retry_delay: float | timedelta = 300, deadline: float | timedelta | Deadline | None = None,
                 tags: tuple[str, ...] | list[str] = (), params: dict[str, Any] | ParamsDict | None = None,
                 on_failure: str | None = None, on_deadline_missed: str | None = None,
                 finished_runs_kept: int | None = None,
                 template_searchpath: str | Iterable[str] | None = None,
                 template_undefined: type[Any] | None = None,
                 user_defined_macros: dict[str, Any] | None = None,
                 user_defined_filters: dict[str, Callable[..., Any]] | None = None,
                 jinja_environment_kwargs: dict[str, Any] | None = None,
                 render_template_as_native_obj: bool = False, end_date: datetime | date | None = None,
                 on_success_callback: Any = None, on_failure_callback: Any = None,
                 max_active_tasks: int = 16, dagrun_timeout: float | timedelta | None = None,
                 default_args: dict[str, Any] | None = None, description: str | None = None,
                 doc_md: str | None = None, owner_links: dict[str, str] | None = None,
                 dag_display_name: str | None = None) -> None:
        # The file that defines the DAG, so errors can name it.
        self.fileloc: str | None = sys._getframe(1).f_code.co_filename
        self.dag_id = dag_id
        self.tasks: dict[str, Task] = {}
        self.task_groups: dict[str, TaskGroup] = {}  # full group id -> group, parents before children
        self._set_fields(schedule, start_date, catchup, max_active_runs, retries)
        self._set_end_date(end_date)
        self._set_more_fields(retry_delay, deadline, tags, params)
        self.on_failure = self._callback(on_failure, "on_failure")
        self.on_deadline_missed = self._callback(on_deadline_missed, "on_deadline_missed")
        self.callbacks = self._guard(lambda: callbacks_of({"on_success_callback": on_success_callback,
                                                           "on_failure_callback": on_failure_callback},
                                                          DAG_CALLBACKS))
        self.default_args = self._default_args(default_args)
        self.description, self.doc_md = description, doc_md
        self.dag_display_name = dag_id if dag_display_name is None else dag_display_name
        self.owner_links: dict[str, str] = {} if owner_links is None else owner_links
        self._check_metadata()
        self.finished_runs_kept = self._runs_kept(finished_runs_kept)
        self._set_limits(max_active_tasks, dagrun_timeout)
        self.template_options = self._guard(lambda: TemplateOptions.of(
            template_searchpath, template_undefined, user_defined_macros, user_defined_filters,
            jinja_environment_kwargs, render_template_as_native_obj))
        if _collectors:
            _collectors[-1].append(self)

    # Arguments come from DAG files: each is checked here, whatever its declared type.
    def _set_fields(self, schedule: str | BaseAsset | list[BaseAsset] | None, start_date: datetime | date | None,
                    catchup: bool, max_active_runs: int, retries: int) -> None:
        if not isinstance(self.dag_id, str) or not ID_PATTERN.match(self.dag_id):
            self._fail(f"dag_id must match {ID_PATTERN.pattern}")
        # Scheduled on assets: a run each time the condition is met (tock/assets.py); no cron schedule.
        self.asset_condition = self._guard(lambda: schedule_condition(schedule))
        if self.asset_condition is not None:
            schedule = None
        if schedule is not None and not _valid_schedule(schedule):
            self._fail(f"bad schedule {schedule!r}: not a cron expression, one of {', '.join(SCHEDULE_PRESETS)}, "
                       "an Asset, a list of them or a condition of them (a & b, a | b)")
        self.schedule: str | None = schedule if isinstance(schedule, str) else None
        self.start_date, self.timezone = self._guard(lambda: _start_of(start_date))
        self._check_dates()
        self.catchup = bool(catchup)
        if isinstance(max_active_runs, bool) or not isinstance(max_active_runs, int) or max_active_runs < 1:
            self._fail(f"max_active_runs must be a positive integer, got {max_active_runs!r}")
        self.max_active_runs = max_active_runs
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            self._fail(f"retries must be a non-negative integer, got {retries!r}")
        self.retries = retries

    def _check_dates(self) -> None:
        """A start date the scheduler can compute with, and a schedule that fires on or after it
        (after now without one: the first run is the first fire time after the DAG is first seen)."""
        if self.start_date is not None and not cron.computable(self.start_date):
            self._fail(f"start_date {_iso(self.start_date)} is outside the dates schedules are computed for "
                       f"({_iso(cron.EARLIEST)} to {_iso(cron.LATEST)}, not included)")
        if self.schedule is None or self.schedule == cron.ONCE:
            return
        after = self.start_date - 1e-3 if self.start_date is not None else datetime.now(UTC).timestamp()
        if cron.next_fire(self.schedule, after, self.timezone) is None:
            since = f"on or after start_date {_iso(self.start_date)}" if self.start_date is not None else "from now on"
            self._fail(f"schedule {self.schedule!r} never fires {since} (in years 1-9999)")

    def _set_end_date(self, end_date: datetime | date | None) -> None:
        """No scheduled or backfill run has a logical date after ``end_date`` (naive: UTC)."""
        self.end_date = self._guard(lambda: _moment(end_date, "end_date"))
        if self.end_date is None:
            return
        if not cron.computable(self.end_date):
            self._fail(f"end_date {_iso(self.end_date)} is outside the dates schedules are computed for "
                       f"({_iso(cron.EARLIEST)} to {_iso(cron.LATEST)}, not included)")
        if self.start_date is not None and self.end_date < self.start_date:
            self._fail(f"end_date {_iso(self.end_date)} is before start_date {_iso(self.start_date)}")

    def _set_more_fields(self, retry_delay: float | timedelta, deadline: float | timedelta | Deadline | None,
                         tags: tuple[str, ...] | list[str], params: dict[str, Any] | ParamsDict | None) -> None:
        self.retry_delay: float = self._guard(lambda: _seconds(retry_delay, "retry_delay"))
        self.deadline, self.deadline_from = self._guard(lambda: deadline_of(deadline))
        if isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags):
            self._fail(f"tags must be a list of strings, got {tags!r}")
        self.tags = tuple(tags)
        self.params = self._guard(lambda: params_of(params, "params"))
        problems = definition_problems(self.params, scheduled=self.schedule is not None)
        if problems:
            self._fail("; ".join(problems))
        self.params_json = self._guard(lambda: to_params_json(self.params))

    def _set_limits(self, max_active_tasks: int, dagrun_timeout: float | timedelta | None) -> None:
        if isinstance(max_active_tasks, bool) or not isinstance(max_active_tasks, int) or max_active_tasks < 1:
            self._fail(f"max_active_tasks must be a positive integer, got {max_active_tasks!r}")
        self.max_active_tasks = max_active_tasks
        self.dagrun_timeout: float | None = self._guard(lambda: seconds_of(dagrun_timeout, "dagrun_timeout"))
        if self.dagrun_timeout == 0:
            self._fail("dagrun_timeout must be positive (or None: no timeout), got 0")

    def _callback(self, target: str | None, name: str) -> str | None:
        """A callback is a webhook URL (http or https) that `tock monitor` POSTs a JSON object to, or
        a ``module:function`` path it calls with that object, in a subprocess."""
        if target is None or (isinstance(target, str) and (target.startswith(("http://", "https://"))
                                                           or CALLBACK_PATH.match(target))):
            return target
        self._fail(f"{name} must be an http(s) webhook URL or a 'module:function' path, got {target!r}")

    def _default_args(self, default_args: dict[str, Any] | None) -> dict[str, Any]:
        """Options for every task of the DAG that does not set them (checked as each task is made)."""
        if default_args is None:
            return {}
        problem = default_args_problem(default_args)
        if problem is not None:
            self._fail(problem)
        problems = TaskOptions(**default_args).problems()
        if problems:
            self._fail("default_args: " + "; ".join(problems))
        return dict(default_args)

    def _check_metadata(self) -> None:
        """Refuse a description, doc_md, owner_links or dag_display_name of the wrong type, or a bad owner link
        (checked again when the definition is made: a DAG file may set them after the DAG, ``dag.doc_md = ...``)."""
        problems = dag_metadata_problems(self.description, self.doc_md, self.owner_links, self.dag_display_name)
        if problems:
            self._fail("; ".join(problems))

    def defaults_for(self, kind: str) -> dict[str, Any]:
        """The default_args a task of ``kind`` takes (Python-only options go to Python tasks only)."""
        return defaults_for_kind(self.default_args, kind)

    def _runs_kept(self, kept: int | None) -> int | None:
        if kept is None or (isinstance(kept, int) and not isinstance(kept, bool) and 0 <= kept <= MOST_RUNS_KEPT):
            return kept
        self._fail(f"finished_runs_kept must be None or an integer from 0 to {MOST_RUNS_KEPT:,}, got {kept!r}")

    def _guard(self, compute: Callable[[], Computed]) -> Computed:
        try:
            return compute()
        except (TypeError, ValueError, OverflowError) as error:
            self._fail(str(error))

    def _fail(self, problem: str) -> NoReturn:
        raise DagDefinitionError(self.fileloc, str(self.dag_id), problem)

    def fail(self, problem: str) -> NoReturn:
        """Raise the DagDefinitionError of ``problem`` in this DAG (for the SDK's other modules)."""
        self._fail(problem)

    def __enter__(self) -> DAG:
        _active.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        _active.remove(self)
        if error is None:
            self.validate()

    def check_task(self, task_id: str, options: TaskOptions) -> None:
        """Refuse a task whose id or options are invalid, naming the problem."""
        if not isinstance(task_id, str) or not ID_PATTERN.match(task_id):
            self._fail(f"task_id {task_id!r} must match {ID_PATTERN.pattern}")
        if task_id in self.tasks:
            self._fail(f"duplicate task id {task_id!r}")
        if task_id in self.task_groups:
            self._fail(f"task id {task_id!r} is the id of a task group")
        self.check_options(task_id, options)

    def check_options(self, task_id: str, options: TaskOptions) -> None:
        """Refuse a task's options if one is invalid, naming the task and the problems."""
        problems = options.problems()
        if problems:
            self._fail(f"task {task_id!r}: " + "; ".join(problems))

    def add_task(self, task: Task) -> None:
        self.tasks[task.task_id] = task

    def add_task_group(self, group: TaskGroup) -> None:
        self.task_groups[group.group_id] = group

    def check_same_dag(self, one: Task, other: Task) -> None:
        if one.dag is not other.dag:
            self._fail(f"task {one.task_id!r} cannot depend on {other.task_id!r} of DAG {other.dag.dag_id!r}")

    def validate(self) -> None:
        """Raise DagDefinitionError if the dependencies form a cycle, or a setup is followed by a task
        (not a teardown) whose trigger rule is not all_success (Airflow's rule)."""
        cycle = _find_cycle({task_id: sorted(task.downstream_task_ids) for task_id, task in self.tasks.items()})
        if cycle:
            self._fail("dependency cycle " + " >> ".join(cycle))
        for task in (item for item in self.tasks.values() if item.is_setup):
            for follower in sorted(task.downstream_task_ids):
                down = self.tasks[follower]
                if not down.is_teardown and down.trigger_rule != TriggerRule.ALL_SUCCESS.value:
                    self._fail(f"Setup tasks must be followed with trigger rule ALL_SUCCESS: setup {task.task_id!r} "
                               f"is followed by {follower!r}, whose trigger_rule is {down.trigger_rule!r}")

    def to_definition(self, file_path: str) -> DagDefinition:
        """The serializable definition the DAG processor publishes."""
        self.validate()
        self._check_metadata()
        from tock.setup_teardown import indirect_setups

        setups = indirect_setups(self)
        return DagDefinition(
            dag_id=self.dag_id, file_path=str(file_path), schedule=self.schedule, start_date=self.start_date,
            catchup=self.catchup, max_active_runs=self.max_active_runs, deadline=self.deadline,
            deadline_from=self.deadline_from,
            tags=list(self.tags), params_json=self.params_json,
            tasks=[_task_definition(self.tasks[task_id], setups[task_id]) for task_id in sorted(self.tasks)],
            on_failure=self.on_failure, on_deadline_missed=self.on_deadline_missed,
            finished_runs_kept=self.finished_runs_kept, timezone=self.timezone, end_date=self.end_date,
            task_groups=[_group_definition(group) for group in self.task_groups.values()],
            callbacks=self.callbacks,
            max_active_tasks=self.max_active_tasks, dagrun_timeout=self.dagrun_timeout,
            asset_condition_json="" if self.asset_condition is None else json.dumps(self.asset_condition.condition(),
                                                                                    sort_keys=True),
            schedule_assets=[] if self.asset_condition is None else [asset.definition() for asset in
                                                                     self.asset_condition.iter_assets()],
            description=self.description, doc_md=markdown_of(self.doc_md, self.fileloc),
            owner_links=dict(self.owner_links), dag_display_name=self.dag_display_name or self.dag_id,
        )

    def test(self, run_after: datetime | None = None, logical_date: datetime | None = None,
             run_conf: dict[str, Any] | None = None, conn_file_path: str | None = None,
             variable_file_path: str | None = None, use_executor: bool = False,
             mark_success_pattern: Any = None) -> Any:
        """Run the DAG once, here, to its end, and return the run (``.state``, ``.task_instances``,
        ``.task_instance(task_id).return_value``): Airflow's ``dag.test()``, with the scheduler's own
        core deciding and each try run in this process with its recorded context (tock_cli/local_run.py).
        Progress goes to standard output. ``use_executor`` and ``mark_success_pattern`` are not offered."""
        if use_executor or mark_success_pattern is not None:
            raise NotImplementedError("dag.test(): Tock runs every try in this process; use_executor and "
                                      "mark_success_pattern are not offered")
        if conn_file_path is not None or variable_file_path is not None:
            raise NotImplementedError("dag.test(): conn_file_path and variable_file_path are not offered yet; "
                                      "set TOCK_CONN_<ID> / TOCK_VAR_<KEY> in the environment")
        from tock_cli.local_run import run_dag

        return run_dag(self, logical_date=_moment(logical_date or run_after, "logical_date"), conf=run_conf,
                       report=lambda line: print(line, flush=True))

    def __repr__(self) -> str:
        return f"<DAG {self.dag_id} ({len(self.tasks)} tasks)>"


def fingerprint(definition: DagDefinition) -> str:
    """A stable hash of a definition: equal definitions have equal fingerprints."""
    canonical = json.dumps(asdict(definition), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _task_definition(task: Task, setups: list[str]) -> TaskDefinition:
    return TaskDefinition(
        task_id=task.task_id, kind=task.kind, command=task.command, upstream=sorted(task.upstream_task_ids),
        retries=task.retries, retry_delay=task.retry_delay, execution_timeout=task.execution_timeout,
        deadline=task.deadline, executor=task.executor, queue=task.queue,
        pod_override_json=task.options.pod_override_json(),
        params_json=to_params_json(params_of(task.options.params, "params")),
        trigger_rule=task.trigger_rule, is_setup=task.is_setup, is_teardown=task.is_teardown,
        on_failure_fail_dagrun=task.on_failure_fail_dagrun, setups=setups, chooses=task.chooses,
        ignore_downstream_trigger_rules=task.ignore_downstream_trigger_rules,
        task_group=task.task_group.group_id if task.task_group is not None else "",
        callbacks=_task_callbacks(task),
        priority_weight=task.priority_weight, weight_rule=task.weight_rule,
        max_active_tis_per_dag=task.max_active_tis_per_dag, max_active_tis_per_dagrun=task.max_active_tis_per_dagrun,
        retry_exponential_backoff=task.retry_exponential_backoff, max_retry_delay=task.max_retry_delay,
        mapped=None if task.mapped is None else definition_of(task.mapped, task.options.max_map_length),
        sensor=task.sensor, external=task.external, time_wait=task.time_wait, marker=task.marker,
        pool="" if task.options.pool in (None, DEFAULT_POOL) else task.options.pool, pool_slots=task.options.pool_slots,
        outlets=[asset.definition() for asset in outlets_of(task.options.outlets, task.task_id)[0]],
        outlet_aliases=[alias.name for alias in outlets_of(task.options.outlets, task.task_id)[1]],
        inlets=[asset.definition() for asset in outlets_of(task.options.inlets, task.task_id)[0]],
        owner=task.options.owner, doc_md=task.options.doc_md, doc=task.options.doc,
    )


def _task_callbacks(task: Task) -> dict[str, list[str]]:
    """The task's callbacks as they were checked when it was made (a name rebound since fails here)."""
    try:
        return task.options.callbacks()
    except ValueError as error:
        task.dag.fail(f"task {task.task_id!r}: {error}")


def _group_definition(group: TaskGroup) -> TaskGroupDefinition:
    parent = group.parent_group
    return TaskGroupDefinition(group_id=group.group_id, parent_id=parent.group_id if parent is not None else "",
                               tooltip=group.tooltip)


def _valid_schedule(schedule: Any) -> bool:
    if not isinstance(schedule, str):
        return False
    return schedule in SCHEDULE_PRESETS or cron.valid(schedule)


def _seconds(value: float | timedelta, what: str) -> float:
    """A duration that must be given (not None), as seconds."""
    seconds = seconds_of(value, what)
    if seconds is None:
        raise ValueError(f"{what} must be seconds or a timedelta, not None")
    return seconds


def _start_of(start: datetime | date | None) -> tuple[float | None, str]:
    """The start date's moment and the DAG's time zone, Airflow's rule: the start date's own zone
    (a naive start date, a date or none: UTC)."""
    moment = _moment(start, "start_date")
    if not isinstance(start, datetime) or start.tzinfo is None or moment is None:
        return moment, cron.UTC_NAME
    try:
        return moment, cron.zone_name(start.tzinfo, start)
    except ValueError as error:
        raise ValueError(f"start_date {start.isoformat()}: {error}") from None


def _moment(when: datetime | date | None, name: str) -> float | None:
    """Seconds since the epoch of a datetime (naive: UTC) or a date (its midnight, UTC)."""
    if when is None:
        return None
    if not isinstance(when, datetime):
        if not isinstance(when, date):
            raise TypeError(f"{name} must be a datetime, got {when!r}")
        when = datetime.combine(when, time())
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    elif when.utcoffset() is None:
        raise ValueError(f"{name} {when!r} has a tzinfo that gives no UTC offset")
    return when.timestamp()


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat() if cron.in_calendar(moment) else repr(moment)


def _find_cycle(downstream: dict[str, list[str]]) -> list[str]:
    """One cycle as a closed path of task ids, or [] (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in downstream:
        if root in state:
            continue
        path, stack = [root], [iter(downstream[root])]
        state[root] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(downstream[child]))
    return []
