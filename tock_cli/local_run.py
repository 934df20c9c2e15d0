"""One run of a DAG in this process, with no broker and no service: ``tock dags test`` and ``dag.test()``.

The scheduler's own core decides (``evolve`` / ``decide``, the same rules as a live scheduler), over a
log kept in memory: the DAG is parsed, a manual run is triggered, each try the core queues runs here,
in this process, with the context its TaskQueued records (``services/runner/task_code.py``, as the
runner's child does), and its outcome is folded, as a runner reports it (a branch's or short circuit's
choice, a try skipped). The clock is the core's argument, so a retry's delay is skipped rather than
waited out. What is not the same as a live run: tries run one at a time, in
this process (no execution timeout, no heartbeats, no executor: every task runs here, whatever its
executor); the log is not written anywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from infra.secrets.env import EnvironmentSecrets
from schemas import (
    CommandRejected,
    DagParsed,
    DagRunFinished,
    Event,
    TaskFailed,
    TaskMapFailed,
    TaskPoked,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TriggerDagRun,
)
from schemas.runs import manual_run_id
from schemas.tasks import instance_name
from services.runner.task_code import TryProgress, TryResult, run_task_code
from services.scheduler.core import Policy, SchedulerState, decide, evolve
from services.scheduler.core.mapping import mapped_instances
from services.scheduler.core.model import DEFERRED, DagRun, TaskInstance
from tock.dag import DAG, fingerprint
from tock.exceptions import retryable
from tock.params import ParamValidationError
from tock.secrets import SecretsBackend, SecretsChain, install
from tock.values import decode_values

RUNNER = "local-run"
MOST_TURNS = 100_000  # decisions of one run at most (a DAG that never ends is a bug to report, not to spin on)


@dataclass(frozen=True, slots=True)
class TaskInstanceResult:
    """One task instance at the end of a local run."""

    task_id: str
    state: str
    try_number: int
    map_index: int = -1
    values_json: str = ""
    error: str = ""

    @property
    def values(self) -> dict[str, Any]:
        return decode_values(self.values_json)

    @property
    def return_value(self) -> Any:
        return self.values.get("return_value")


@dataclass
class LocalRun:
    """A DAG run made in this process: its state and every task instance's."""

    dag_id: str
    run_id: str
    state: str = "running"
    task_instances: list[TaskInstanceResult] = field(default_factory=list)
    log: list[Event] = field(default_factory=list)  # every event, in the order it was folded

    def task_instance(self, task_id: str, map_index: int = -1) -> TaskInstanceResult:
        return next(instance for instance in self.task_instances
                    if instance.task_id == task_id and instance.map_index == map_index)

    def as_json(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "state": self.state,
                "task_instances": [{"task_id": item.task_id, "map_index": item.map_index, "state": item.state,
                                    "try_number": item.try_number,
                                    "values": json.loads(item.values_json) if item.values_json else {},
                                    "error": item.error} for item in self.task_instances]}


Report = Callable[[str], None]  # a line for people: what happens, as it happens


def run_dag(dag: DAG, *, logical_date: float | None = None, conf: dict[str, Any] | None = None,
            xcom_max_bytes: int = 1 << 20, report: Report = lambda _line: None,
            secrets: Sequence[SecretsBackend] | None = None) -> LocalRun:
    """Run ``dag`` once to its end, here; the run's outcome with every task instance's. ``secrets``: the
    chain variables and connections are read through (default: this process's TOCK_VAR_* / TOCK_CONN_*)."""
    install(SecretsChain(list(secrets) if secrets is not None else [EnvironmentSecrets(dict(os.environ))]))
    now = time.time()
    definition = replace(dag.to_definition(dag.fileloc or "<dag>"), schedule=None)  # one manual run, nothing else
    # Every try runs here, one at a time: pools cap nothing (as Airflow's dags test ignores them).
    definition = replace(definition, tasks=[replace(task, pool="") for task in definition.tasks])
    request_id = uuid.uuid4().hex
    local = LocalRun(dag.dag_id, manual_run_id(request_id))
    state, policy = SchedulerState(), Policy(scheduler_id=RUNNER, heartbeat_timeout=float("inf"))
    _fold(state, local, [DagParsed(dag_id=dag.dag_id, file_path=definition.file_path,
                                   fingerprint=fingerprint(definition), definition=definition, at=now),
                         TriggerDagRun(dag_id=dag.dag_id, request_id=request_id, conf_json=json.dumps(conf or {}),
                                       logical_date=logical_date, requested_by="tock dags test", at=now)])
    for _turn in range(MOST_TURNS):
        decided = decide(state, now, policy)
        _fold(state, local, decided)
        _refuse_if_rejected(decided, request_id)
        for queued in [event for event in decided if isinstance(event, TaskQueued)]:
            _fold(state, local, _run_try(dag, queued, xcom_max_bytes, report))
        finished = [event for event in decided if isinstance(event, DagRunFinished) and event.run_id == local.run_id]
        if finished:
            return _ended(local, finished[0].state, state)
        if not decided:
            wake, sensing = _next_wake(state)
            if wake is None:
                return _ended(local, "stuck", state)
            if sensing:  # a sensor's next poke waits for the world to change: in real time
                time.sleep(max(wake - time.time(), 0.0))
                now = max(now, wake, time.time())
            else:  # a retry is due at once here: nothing else is running
                now = max(now, wake)
    return _ended(local, "stuck", state)


def _refuse_if_rejected(decided: list[Any], request_id: str) -> None:
    """The core refused the trigger (its conf does not fit the params): raise saying why, as Airflow's
    dag.test() does, rather than wait for a run that never starts."""
    for event in decided:
        if isinstance(event, CommandRejected) and event.request_id == request_id:
            raise ParamValidationError(f"the run was refused: {event.reason}")


def _fold(state: SchedulerState, local: LocalRun, events: list[Any]) -> None:
    for event in events:
        local.log.append(event)
        evolve(state, event)


def _run_try(dag: DAG, queued: TaskQueued, xcom_max_bytes: int, report: Report) -> list[Any]:
    """The try's user code, here: its TaskStarted and its outcome."""
    ids = _ids(queued)
    started = TaskStarted(**ids, runner_id=RUNNER, hostname="localhost", pid=0, executor="local", at=time.time())
    report(f"[{_name(queued)}] try {queued.try_number}: running")
    progress = TryProgress()
    try:
        with _try_variables(queued):
            result = run_task_code(dag.tasks[queued.task_id], queued.run_id, queued.try_number, queued,
                                   xcom_max_bytes, progress)
    except Exception as error:  # noqa: BLE001 - the try fails, as a runner would report it
        report(f"[{_name(queued)}] try {queued.try_number}: failed\n{''.join(traceback.format_exception(error))}")
        return [started, TaskFailed(**ids, runner_id=RUNNER, error=f"{type(error).__name__}: {error}",
                                    traceback="".join(traceback.format_exception(error)),
                                    rendered_json=progress.rendered_json, retryable=retryable(error), at=time.time())]
    if result.exit_code or result.signal:
        why = f"user code exited with code {result.exit_code}" if result.exit_code else \
            f"user code killed by signal {result.signal}"
        report(f"[{_name(queued)}] try {queued.try_number}: failed: {why}")
        return [started, TaskFailed(**ids, runner_id=RUNNER, error=why, rendered_json=result.rendered_json,
                                    at=time.time())]
    return [started, _ended_well(queued, result, report)]


@contextlib.contextmanager
def _try_variables(queued: TaskQueued) -> Iterator[None]:
    """The try's ``TOCKRUN_*`` variables, as a runner gives its user code, set while it runs here."""
    from infra.task_environment import TRY_PREFIX  # imported here: at the top it closes an import cycle

    variables = {f"{TRY_PREFIX}DAG_ID": queued.dag_id, f"{TRY_PREFIX}RUN_ID": queued.run_id,
                 f"{TRY_PREFIX}TASK_ID": queued.task_id, f"{TRY_PREFIX}TRY_NUMBER": str(queued.try_number)}
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _ended_well(queued: TaskQueued, result: TryResult, report: Report) -> TaskSucceeded | TaskTrySkipped | TaskPoked:
    """The outcome of a try whose code ran to its end: skipped (it raised the skip exception), a sensor's
    poke not met, or succeeded, with what a branch or short circuit follows."""
    ids = {**_ids(queued), "runner_id": RUNNER}
    if result.poked:
        report(f"[{_name(queued)}] try {queued.try_number}: poked, not met"
               + (" (its timeout has passed)" if result.timed_out else ""))
        return TaskPoked(**ids, reschedule_at=result.reschedule_at, timed_out=result.timed_out,
                         rendered_json=result.rendered_json, at=time.time())
    shown = f" · values {result.values_json}" if result.values_json else ""
    if result.skipped:
        report(f"[{_name(queued)}] try {queued.try_number}: skipped: {result.reason}{shown}")
        return TaskTrySkipped(**ids, reason=result.reason, values_json=result.values_json,
                              rendered_json=result.rendered_json, at=time.time())
    if result.follow is not None:
        shown += f" · follows {', '.join(result.follow) or 'none of its downstream tasks'}"
    if result.asset_events_json:
        shown += f" · asset events {result.asset_events_json}"
    if result.output:
        shown += f" · {len(result.output)} Kafka output record(s) (not written by dags test)"
    for command in result.commands:  # here nothing else runs: the other DAG's run is not started
        shown += f" · would append {command['command']} for {command['dag_id']} (not in dags test)"
    report(f"[{_name(queued)}] try {queued.try_number}: success{shown}")
    return TaskSucceeded(**ids, values_json=result.values_json, rendered_json=result.rendered_json,
                         follow=result.follow, asset_events_json=result.asset_events_json, at=time.time())


def _ids(queued: TaskQueued) -> dict[str, Any]:
    return {"dag_id": queued.dag_id, "run_id": queued.run_id, "task_id": queued.task_id,
            "map_index": queued.map_index, "try_number": queued.try_number}


def _name(queued: TaskQueued) -> str:
    """The instance as reports name it: ``task`` or ``task[i]`` (a mapped task's instance i)."""
    return instance_name(queued.task_id, queued.map_index)


def _next_wake(state: SchedulerState) -> tuple[float | None, bool]:
    """The next retry or sensor poke due, and whether it is a sensor's (a poke, a deferral: in real time)."""
    waits = [(instance.not_before, instance.wait_pokes > 0 or instance.state == DEFERRED) for key in state.waiting
             if (instance := state.instance(key)) is not None and instance.not_before is not None]
    return min(waits, default=(None, False))


def _ended(local: LocalRun, outcome: str, state: SchedulerState) -> LocalRun:
    local.state = outcome
    run = state.runs.get((local.dag_id, local.run_id)) or state.finished.get((local.dag_id, local.run_id))
    errors = {(event.task_id, event.map_index): event.error for event in local.log if isinstance(event, TaskFailed)}
    errors.update({(event.task_id, -1): event.reason for event in local.log if isinstance(event, TaskMapFailed)})
    entry = state.dags.get(local.dag_id)
    if run is not None and entry is not None:  # in the DAG's order: every task after its upstream
        local.task_instances = [TaskInstanceResult(instance.task_id, instance.state, instance.try_number,
                                                   instance.map_index, instance.values_json,
                                                   errors.get((instance.task_id, instance.map_index), ""))
                                for task_id in entry.order for instance in _instances_of(run, task_id)]
    return local


def _instances_of(run: DagRun, task_id: str) -> list[TaskInstance]:
    """A task's instance, or an expanded mapped task's instances in map index order."""
    whole = run.tasks.get(task_id)
    if whole is not None and whole.map_count > 0:
        return mapped_instances(run, task_id)
    return [whole] if whole is not None else []
