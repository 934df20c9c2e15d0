"""DAG definitions (topic ``tock.dags``, keyed by dag_id, compacted), and the scheduler's quarantine
of a DAG it cannot fold or decide (topic ``tock.events``, keyed by dag_id)."""

from __future__ import annotations

from dataclasses import field

from schemas.declare import DAGS, EVENTS, EventBase, event, record
from schemas.routing import BY_DAG

# The weight rules a task definition may name (Airflow's WeightRule values), read by
# services/scheduler/core/priorities.py: how a task's priority_weight adds up to its priority.
WEIGHT_RULES = ("downstream", "upstream", "absolute")

# The trigger rules a task definition may name (Airflow's), read by services/scheduler/core/trigger_rules.py.
TRIGGER_RULES = ("all_success", "all_failed", "all_done", "all_done_setup_success", "all_done_min_one_success",
                 "all_skipped", "one_success", "one_failed", "one_done", "none_failed", "none_failed_min_one_success",
                 "none_skipped", "always")


# Airflow's core.max_map_length: the most instances one mapped task expands to, unless it says otherwise.
MAX_MAP_LENGTH = 1024
MAP_KINDS = ("expand", "expand_kwargs")


@record
class MapInput:
    """One input a mapped task expands over: a literal list or dict (``literal_json``, the value as
    tock/values.py encodes it), or the value an upstream task passes on (``task_id`` and ``key``), or
    several upstream values zipped (Airflow's ``XComArg.zip``: element N is the tuple of their elements
    N; ``zip_task_ids`` and ``zip_keys`` in order; as long as the shortest, or with ``zip_fill_json``,
    an encoded fill value, as the longest). ``name`` is the argument it fills ("" for expand_kwargs'
    one input: each element is the kwargs)."""

    name: str = ""
    literal_json: str = ""
    task_id: str = ""
    key: str = "return_value"
    zip_task_ids: list[str] = field(default_factory=list)
    zip_keys: list[str] = field(default_factory=list)
    zip_fill_json: str = ""  # "": no fill value (as long as the shortest)


@record
class MapDefinition:
    """How a mapped task (Airflow's ``.expand()`` / ``.expand_kwargs()``) expands: ``expand`` makes one
    instance per element of the cartesian product of its inputs (in their order), ``expand_kwargs``
    one per element of its one input (each a dict of kwargs). More than ``max_map_length`` instances
    fail the task."""

    kind: str = "expand"
    inputs: list[MapInput] = field(default_factory=list)
    max_map_length: int = MAX_MAP_LENGTH
    # The mapped task group it is in (Airflow's ``@task_group ... .expand()``), "" none: every task of
    # the group expands over the group's inputs, so they have the same instances, and instance N of
    # one reads instance N of an upstream in the same group (waits for it, and reads its value).
    group: str = ""


# The modes a sensor may wait in (Airflow's): "reschedule" pokes in short tries with the wait between them a
# timer of the owner's (no slot, no process held); "poke" loops in one try, holding its slot, as Airflow does.
SENSOR_MODES = ("reschedule", "poke")
SENSOR_TIMEOUT = 7 * 24 * 60 * 60.0  # Airflow's default sensor timeout: a week


@record
class SensorDefinition:
    """How a sensor waits (services/scheduler/core/sensors.py): seconds between pokes (``poke_interval``,
    doubled each poke with ``exponential_backoff``, at most ``max_wait``), how long it may wait in all from
    its first poke (``timeout``), and whether it then ends skipped (``soft_fail``) rather than failed."""

    poke_interval: float = 60.0
    timeout: float = SENSOR_TIMEOUT
    soft_fail: bool = False
    exponential_backoff: bool = False
    max_wait: float | None = None
    mode: str = "reschedule"


@record
class ExternalWaitDefinition:
    """What an external task sensor (tock/external.py ``ExternalTaskSensor``) waits on: DAG
    ``external_dag_id``'s run of the sensor's logical date minus ``delta`` seconds, its tasks ``task_ids``
    (or those of group ``task_group_id``; neither: the run) in ``allowed_states``; one of them in
    ``skipped_states`` skips the sensor, in ``failed_states`` fails it (services/scheduler/core/external.py)."""

    external_dag_id: str
    task_ids: list[str] = field(default_factory=list)
    task_group_id: str = ""
    allowed_states: list[str] = field(default_factory=lambda: ["success"])
    skipped_states: list[str] = field(default_factory=list)
    failed_states: list[str] = field(default_factory=list)
    delta: float = 0.0
    check_existence: bool = False
    # A TriggerDagRunOperator's wait_for_completion: the wait follows its successful try, on the run it
    # triggered (the DAG and run its try pushed as ``trigger_dag_id`` / ``trigger_run_id``).
    after_success: bool = False


@record
class MarkerDefinition:
    """An ``ExternalTaskMarker`` (tock/external.py): a task of another DAG depends on this one. Cleared
    with ``recursive``, it clears ``external_task_id`` of ``external_dag_id``'s run at ``logical_date``
    (None: its own run's) and what follows it, at most ``recursion_depth`` markers deep
    (services/scheduler/core/markers.py)."""

    external_dag_id: str
    external_task_id: str
    logical_date: float | None = None
    recursion_depth: int = 10


@record
class TimeWaitDefinition:
    """What a time sensor (tock/sensors.py ``TimeDeltaSensor``, ``DateTimeSensor`` with a fixed moment)
    waits for, decided by the scheduler with no poke: the moment ``target`` (seconds since the epoch), or
    ``delta`` seconds after the run's data interval end (its logical date without one)."""

    target: float | None = None
    delta: float | None = None


@record
class WatcherDefinition:
    """An asset's watcher (tock/assets.py ``AssetWatcher`` with a Kafka ``MessageQueueTrigger``): each
    record of ``topics`` (on Tock's Kafka cluster) is an event of the asset, exactly once, or, with
    ``apply_function`` (a dotted path), each record for which it returns a truthy value
    (services/asset_watcher/)."""

    name: str
    topics: list[str]
    apply_function: str = ""


@record
class AssetDefinition:
    """An asset a task updates (an outlet) or a schedule names (tock/assets.py ``Asset``): its uri (what
    identifies it), name, group, the asset's own extra (a JSON object) and its watchers."""

    uri: str
    name: str = ""
    group: str = "asset"
    extra_json: str = "{}"
    watchers: list[WatcherDefinition] = field(default_factory=list)


@record
class TaskDefinition:
    """One task of a DAG as the scheduler and the runner need it."""

    task_id: str
    # "python" (a @task function), "bash", "empty", "sensor", "external_sensor", "time_sensor" or "operator"
    # (a BaseOperator subclass: its try calls execute)
    kind: str
    command: str = ""  # the bash command; empty for python tasks
    upstream: list[str] = field(default_factory=list)
    retries: int = 0
    retry_delay: float = 300.0
    execution_timeout: float | None = None
    executor: str = "local"
    queue: str = "default"
    pod_override_json: str | None = None
    # Seconds after the task instance was first queued in a run by which it must have ended.
    deadline: float | None = None
    params_json: str = "{}"  # the task's own params, over the DAG's (schemas/params.py)
    # Control flow (services/scheduler/core/trigger_rules.py). The rule its upstreams' states are
    # read by; whether it is a setup or a teardown (a teardown fails its run only with
    # on_failure_fail_dagrun); the setups it runs within that are not its direct upstreams (they must
    # succeed first); what its return value decides ("branch": the downstream task ids it follows,
    # "short_circuit": whether its downstream run at all); and the id of the innermost task group it is in.
    trigger_rule: str = "all_success"
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False
    setups: list[str] = field(default_factory=list)
    chooses: str = ""
    ignore_downstream_trigger_rules: bool = True  # a short circuit skips everything downstream
    task_group: str = ""
    # Airflow-style callbacks (``on_success_callback``...): trigger ("success", "failure", "retry",
    # "execute", "skipped") -> the callables `tock monitor` calls with the task's context, each as
    # "module:qualname" or "/path/of/the/dag_file.py:qualname" (tock/callbacks.py).
    callbacks: dict[str, list[str]] = field(default_factory=dict)
    # Priorities and limits (services/scheduler/core/priorities.py, limits.py). When more tries are
    # ready than may be queued or launched, higher priorities go first: the task's priority_weight,
    # added up as its weight_rule says. At most max_active_tis_per_dag tries of the task are queued or
    # running across the DAG's runs, max_active_tis_per_dagrun within one run (None: no limit).
    priority_weight: int = 1
    weight_rule: str = "downstream"
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None
    # The retry delay doubles with each try (Airflow's formula, its jitter derived from the try's
    # identity: core/retries.py), at most max_retry_delay seconds.
    retry_exponential_backoff: bool = False
    max_retry_delay: float | None = None
    mapped: MapDefinition | None = None  # a mapped task: how it expands (services/scheduler/core/mapping.py)
    sensor: SensorDefinition | None = None  # a sensor (kind "sensor"): how it waits between pokes
    # An external task sensor (kind "external_sensor"): what it waits on, decided on the log with no try
    # (its ``sensor`` gives its timeout and soft_fail).
    external: ExternalWaitDefinition | None = None
    # A time sensor (kind "time_sensor"): the moment it waits for, a timer of the scheduler's (no try).
    time_wait: TimeWaitDefinition | None = None
    # An ExternalTaskMarker (kind "empty"): what a recursive clear of it clears in another DAG.
    marker: MarkerDefinition | None = None
    # The pool its tries take ``pool_slots`` slots of while queued or running (services/scheduler/core/pools.py);
    # "" none (Airflow's default_pool: no cap here).
    pool: str = ""
    pool_slots: int = 1
    # The assets a success of the task updates (Airflow's ``outlets``), and the asset aliases it may add
    # events through at run time (services/scheduler/core/assets.py).
    outlets: list[AssetDefinition] = field(default_factory=list)
    outlet_aliases: list[str] = field(default_factory=list)
    # The assets it reads (Airflow's ``inlets``): their latest events reach its tries' ``inlet_events``.
    inlets: list[AssetDefinition] = field(default_factory=list)
    # Who owns it (Airflow's ``owner``, default "airflow": the UI's Owner column) and its docs (Airflow's
    # ``doc_md``, Markdown, and ``doc``, plain text; None: none).
    owner: str = "airflow"
    doc_md: str | None = None
    doc: str | None = None


@record
class TaskGroupDefinition:
    """A task group (``TaskGroup`` / ``@task_group``): its full id, the group it is in ("" the DAG),
    and its tooltip, for the UI's collapsible grid and graph."""

    group_id: str
    parent_id: str = ""
    tooltip: str = ""


@record
class DagDefinition:
    """A whole DAG, serialized by the DAG processor."""

    dag_id: str
    file_path: str
    schedule: str | None = None
    start_date: float | None = None
    catchup: bool = False
    max_active_runs: int = 16
    deadline: float | None = None
    # What the run's deadline counts from: "start" (its DagRunCreated) or "logical_date" (scheduled runs).
    deadline_from: str = "start"
    tags: list[str] = field(default_factory=list)
    params_json: str = "{}"
    tasks: list[TaskDefinition] = field(default_factory=list)
    on_failure: str | None = None  # webhook URL or module:function called when a run fails
    on_deadline_missed: str | None = None  # webhook URL or module:function called when a run misses its deadline
    # Finished runs the scheduler keeps for clear, mark and backfill; None: TOCK_SCHEDULER_FINISHED_RUNS_KEPT.
    finished_runs_kept: int | None = None
    timezone: str = "UTC"  # IANA name its schedule is evaluated in (the start_date's zone)
    end_date: float | None = None  # no scheduled run has a logical date after it
    task_groups: list[TaskGroupDefinition] = field(default_factory=list)
    # Airflow-style DAG callbacks (``on_success_callback`` / ``on_failure_callback``): trigger
    # ("success", "failure") -> callables called with the run's context, as a task's callbacks are.
    callbacks: dict[str, list[str]] = field(default_factory=dict)
    # At most this many tries of the DAG are queued or running at once, across its runs
    # (Airflow's max_active_tasks, default core.max_active_tasks_per_dag = 16).
    max_active_tasks: int = 16
    # Seconds a run may run (from its creation, or its reopening); then it fails (core/timeouts.py).
    dagrun_timeout: float | None = None
    # Scheduled on assets (``schedule=[Asset(...)]`` or a condition of them, tock/assets.py): the condition
    # as JSON ({"asset": uri} | {"alias": name} | {"all": [...]} | {"any": [...]}); "" not. Its assets.
    asset_condition_json: str = ""
    schedule_assets: list[AssetDefinition] = field(default_factory=list)
    # What the UI shows of it (Airflow's names): a one-line ``description``, its docs in Markdown (``doc_md``),
    # a link per owner (owner name -> an http(s) or mailto URL) and the name it is shown by ("": its dag_id).
    description: str | None = None
    doc_md: str | None = None
    owner_links: dict[str, str] = field(default_factory=dict)
    dag_display_name: str = ""


@event(DAGS, route=BY_DAG, version=22)
class DagParsed(EventBase):
    """The latest definition of a DAG; written only when its fingerprint changed.
    v2: the definition has on_failure and on_deadline_missed (webhook URLs).
    v3: each task definition has a deadline (per-task deadline, seconds after first queued).
    v4: the definition has deadline_from ("start" or "logical_date").
    v5: the definition has finished_runs_kept (the scheduler's retention of its finished runs).
    v6: the definition has timezone and end_date, each task definition its own params_json.
    v7: task definitions have their trigger rule, setup/teardown, what they choose and their group;
    the definition has its task groups.
    v8: the definition and its task definitions have their Airflow-style callbacks.
    v9: task definitions have their priority_weight and weight_rule, max_active_tis_per_dag / _per_dagrun,
    retry_exponential_backoff and max_retry_delay; the definition has max_active_tasks and dagrun_timeout.
    v10: a mapped task's definition says how it expands (``mapped``).
    v11: a mapped task's input may zip several upstream values (MapInput ``zip_*``).
    v12: a mapped task may be one of a mapped task group's (MapDefinition ``group``).
    v13: a sensor's task definition says how it waits (``sensor``).
    v14: task definitions have their ``pool`` and ``pool_slots``.
    v15: task definitions have their ``outlets`` and ``outlet_aliases``; the definition its asset condition.
    v16: an external task sensor's task definition says what it waits on (``external``).
    v17: an asset's definition has its ``watchers``.
    v18: a wait may follow its task's successful try (``external.after_success``).
    v19: a time sensor's task definition says the moment it waits for (``time_wait``).
    v20: an ExternalTaskMarker's task definition says what it clears (``marker``).
    v21: task definitions have their ``inlets`` (the assets whose events their tries read).
    v22: the definition has its ``description``, ``doc_md``, ``owner_links`` and ``dag_display_name``; task
    definitions their ``owner``, ``doc_md`` and ``doc``."""

    dag_id: str
    file_path: str
    fingerprint: str
    definition: DagDefinition
    at: float


@event(EVENTS, route=BY_DAG)
class DagQuarantined(EventBase):
    """The owner of the DAG's partition could not fold or decide something of this DAG (``reason``
    names the error): it creates no runs and no tries for it until a definition with another
    fingerprint is parsed (its file was fixed). The rest of the partition goes on."""

    dag_id: str
    file_path: str = ""
    reason: str
    fingerprint: str  # of the definition quarantined ("" when none was known)
    scheduler_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class DagQuarantineLifted(EventBase):
    """The quarantine of a DAG ended: a definition with another fingerprint was parsed, or the DAG
    was deleted. ``file_path`` and ``fingerprint`` are those its DagQuarantined named."""

    dag_id: str
    file_path: str = ""
    fingerprint: str
    scheduler_id: str
    at: float
