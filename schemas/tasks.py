"""Task-instance lifecycle (topic ``tock.events``, heartbeats on ``tock.heartbeats``).

Every event names its try (dag_id, run_id, task_id, try_number). Events written by a
runner also carry its runner_id; an event of a try that is no longer current is
recorded but changes nothing.
"""

from __future__ import annotations

from dataclasses import field

from schemas.declare import EVENTS, HEARTBEATS, EventBase, event, record
from schemas.routing import BY_DAG, BY_TASK_INSTANCE


def instance_name(task_id: str, map_index: int = -1) -> str:
    """A task instance as messages, tables and ``upstream_states`` name it: ``task``, or ``task[N]`` for
    instance N of a mapped task."""
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


@record
class TryInput:
    """The values of one upstream try a queued try reads (its provenance): ``values_json`` is that
    try's TaskSucceeded ``values_json`` (a JSON object, key -> value as tock/values.py encodes it).
    ``left_out``: the try's inputs were too large together to carry, so these values are not here
    (a try that reads them fails, saying so)."""

    task_id: str
    try_number: int
    map_index: int = -1
    values_json: str
    left_out: bool = False


@event(EVENTS, route=BY_DAG, version=5)
class TaskQueued(EventBase):
    """A try was decided. Who owns it and on which executor is written here once, and so is the
    context its user code runs with: the run's dates, type and conf, the params resolved for it, and
    the values of its upstream tries (``inputs``), so the same try can be run again with exactly
    these inputs. Dates are seconds since the epoch (UTC).
    v2 added the context (v1 records decode with it empty: tries queued before it knew none).
    v3 added map_index (-1: not mapped) and map_element_json.
    v4 added triggering_asset_events_json: the asset events that created its run (its DagRunCreated's).
    v5 added inlet_events_json: the latest events of the assets the task reads (its ``inlets``), as the
    DAG's partition knew them when the try was decided: {uri: [event, ...]}, oldest first ("" none)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    executor: str
    queue: str
    scheduler_id: str
    run_type: str = ""
    logical_date: float | None = None
    data_interval_start: float | None = None
    data_interval_end: float | None = None
    conf_json: str = "{}"
    params_json: str = "{}"  # the params as the try sees them: the DAG's and task's defaults, then the conf
    prev_data_interval_start_success: float | None = None  # of the DAG's latest successful run before this one
    prev_data_interval_end_success: float | None = None
    inputs: list[TryInput] = field(default_factory=list)
    # An instance of a mapped task: the arguments it runs with, decided with its expansion (a JSON object,
    # argument name -> value as tock/values.py encodes it; expand_kwargs: the instance's dict). "" none.
    map_element_json: str = ""
    triggering_asset_events_json: str = ""
    inlet_events_json: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class TaskLaunched(EventBase):
    """The executor accepted the try; handle is pid@host:start, a Celery task id or a pod name.
    Written once; nothing a worker reports changes it. v2 added queue (where it was sent).
    v3 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    executor: str
    handle: str
    scheduler_id: str
    queue: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class TaskStarted(EventBase):
    """The runner began the try. executor/queue are as the worker saw them (informational).
    v2 added map_index (-1: not mapped).
    v3 added handle: the try's handle on its executor as the runner knows it (infra/executors/handles.py),
    the one its launch gave it, so a try whose TaskLaunched was never committed can still be adopted."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    hostname: str
    pid: int
    executor: str = ""
    queue: str = ""
    log_path: str = ""
    handle: str = ""
    at: float


@event(HEARTBEATS, route=BY_TASK_INSTANCE, version=2)
class TaskHeartbeat(EventBase):
    """The runner of a try is alive. v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    at: float


@event(EVENTS, route=BY_DAG, version=5)
class TaskSucceeded(EventBase):
    """The try succeeded. Its values (a ``@task``'s return value, what it pushed) are part of this one
    record, so a success never lacks its values and a value never belongs to a try that did not
    succeed: ``values_json`` is a JSON object, key -> value as tock/values.py encodes it ("" none).
    ``rendered_json``: its templated fields as rendered (a JSON object, secrets masked; "" none).
    ``follow``: for a task that chooses (a branch, a short circuit), the ids of its direct downstream
    tasks it chose to follow (the others are skipped; [] skips them all); None follows them all (any other
    task, and a short circuit whose value was true).
    v2 added values_json and rendered_json; v3 added follow.
    v4 added map_index (-1: not mapped).
    v5 added asset_events_json: the asset events the try produced, in the same record as its success (a
    JSON list of {"uri", "name", "group", "extra", "alias"}; "" none: schemas/assets.py)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    values_json: str = ""
    rendered_json: str = ""
    follow: list[str] | None = None
    asset_events_json: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=5)
class TaskFailed(EventBase):
    """The try failed: the user code raised, exited non-zero, crashed or timed out.

    v2 added ``traceback`` (v1 records decode with it empty).
    v3 added ``rendered_json``: its templated fields as rendered, secrets masked ("" none).
    v4 added map_index (-1: not mapped).
    v5 added ``retryable``: false when the user code raised AirflowFailException (or AirflowSensorTimeout),
    so no retry follows whatever retries the task has left, as in Airflow.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    error: str
    traceback: str = ""
    rendered_json: str = ""
    retryable: bool = True
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class TaskRetryScheduled(EventBase):
    """Try ``try_number`` failed; ``next_try_number`` may be queued from ``not_before``, ``delay``
    seconds after the try ended (the task's retry_delay, or its exponential backoff: the decision
    is in the log, so a replay waits the same). v2 added delay (None in v1 records); v3 added
    map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    next_try_number: int
    not_before: float
    delay: float | None = None
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskDeclaredDead(EventBase):
    """A running try fell silent past the heartbeat timeout, or its executor lost it.
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    last_heartbeat_at: float | None = None
    reason: str
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskAdopted(EventBase):
    """After a takeover the new owner found the try alive and took it over.
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    handle: str
    by_scheduler: str
    from_scheduler: str
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class TaskUpstreamFailed(EventBase):
    """The task will not run in this run because of its upstream tasks' states: ``trigger_rule`` is
    the rule that decided it, ``upstream_states`` the states it read (task id -> state), ``reason``
    says it in words. v2 added reason, trigger_rule and upstream_states.
    v3 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    reason: str = ""
    trigger_rule: str = ""
    upstream_states: dict[str, str] = field(default_factory=dict)
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class PodFinished(EventBase):
    """The Kubernetes watcher saw the try's pod end (phase Succeeded/Failed, reason e.g. OOMKilled).
    A try still running when its pod ended (its runner reported no outcome) fails with it.
    v2 added pod_uid and node.
    v3 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    pod_name: str
    phase: str
    reason: str = ""
    exit_code: int | None = None
    pod_uid: str = ""
    node: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class PodStarted(EventBase):
    """The Kubernetes watcher saw the try's pod running on a node (informational: the runner's
    TaskStarted claims the try).
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    pod_name: str
    pod_uid: str
    node: str
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskKillRequested(EventBase):
    """The owner asks the try's runner to stop its user code (a kill, or a clear or mark of a try that
    is running). If it comes before any TaskStarted of the try in log order, no runner runs it.
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    reason: str
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskKilled(EventBase):
    """The runner killed the try's user code as asked. v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    reason: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=3)
class TaskSkipped(EventBase):
    """The task will not run in this run, decided by the owner: its trigger rule, read against its
    upstream tasks' states, says skip (``trigger_rule``, ``upstream_states`` task id -> state), or a
    branch or short circuit upstream did not choose it (``chosen_by`` names that task). ``reason``
    says it in words. v2 added trigger_rule, upstream_states and chosen_by.
    v3 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    reason: str = ""
    trigger_rule: str = ""
    upstream_states: dict[str, str] = field(default_factory=dict)
    chosen_by: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskTrySkipped(EventBase):
    """The try ended skipped: its code raised the skip exception (``AirflowSkipException``). What it
    pushed before (``values_json``) and its rendered fields stay with it, as a success's do.
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    runner_id: str
    reason: str = ""
    values_json: str = ""
    rendered_json: str = ""
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskEmptySucceeded(EventBase):
    """An ``EmptyOperator``'s instance succeeded without a try (it has nothing to run), decided by
    the owner of its partition when its trigger rule let it run.
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskRemoved(EventBase):
    """The task (or its whole DAG) is gone from the DAG files: it will not run in this run. v2 added
    map_index: instance N of a mapped task expanded again to fewer instances (-1: the task)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    reason: str
    at: float


@event(EVENTS, route=BY_DAG)
class TaskDeadlineMissed(EventBase):
    """A task instance had not ended when the deadline its task declares passed: ``deadline`` is
    that moment, its first TaskQueued in the run plus the task's ``deadline`` seconds. Written by
    the monitor, once per task instance (see services/monitor/shell.py)."""

    dag_id: str
    run_id: str
    task_id: str
    deadline: float
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class TaskCleared(EventBase):
    """The owner reset a task instance for a new try, as a ClearTask (request_id) asked: its last
    try had ended (a running one is stopped first).
    v2 added map_index (-1: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1  # which instance of a mapped task (schemas/mapping.py)
    try_number: int
    request_id: str = ""
    at: float
