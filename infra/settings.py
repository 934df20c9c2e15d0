"""Tock's settings: one frozen object read once from ``TOCK_*`` variables at start-up.

Product code never reads the environment itself; the CLI calls :func:`load_settings`
once and passes the result down.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "TOCK_"
# Variables and connections given in the environment (infra/secrets/env.py), not settings:
# TOCK_VAR_<KEY> and TOCK_CONN_<CONN_ID> pass the unknown-variable check.
SECRET_ENV_PREFIXES = ("TOCK_VAR_", "TOCK_CONN_")
MAX_BROKER_NODES = 9
# Where the local broker remembers its node count (written when a cluster is first formatted).
BROKER_NODES_FILE = Path("broker") / "nodes"


class SettingsError(ValueError):
    """A TOCK_* variable is unknown or has an invalid value."""


class Settings(BaseSettings):
    """Every knob Tock has. Field ``x`` is set by the variable ``TOCK_X``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    home: Path = Field(default=Path.home() / ".tock", description="state directory: broker data, logs, SQLite file")
    kafka_bootstrap: str | None = Field(default=None, description="existing Kafka cluster; unset = the local broker")
    kafka_libs: Path = Field(default=Path.home() / ".cache" / "tock" / "kafka-libs", description="Kafka jar cache")
    broker_port: int = Field(default=9092, ge=1, le=65535, description="local broker client port")
    controller_port: int | None = Field(default=None, ge=1, le=65535,
                                        description="first controller port of the local broker (node i: +i-1); "
                                                    "unset = right after the client ports (TOCK_BROKER_PORT + nodes)")
    broker_nodes: int | None = Field(default=None, ge=1, le=MAX_BROKER_NODES,
                                     description="node count of the local broker (node i listens on "
                                                 "TOCK_BROKER_PORT + i-1); unset = what <home>/broker/nodes "
                                                 "remembers (`tock broker start --nodes N` writes it), else 1")
    broker_heap: str = Field(default="512M", pattern=r"^\d+[MG]$", description="local broker JVM heap")
    topic_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$", description="prefix of every topic name")
    partitions: int = Field(default=12, ge=1, le=1000, description="partition count of scheduling topics")
    schema_registry_url: str | None = Field(
        default=None, pattern=r"^https?://\S+$",
        description="a schema registry's Confluent-compatible API (Apicurio: http://HOST:PORT/apis/ccompat/v7): "
                    "records are then written in its wire format, their schemas under <topic>-value subjects; "
                    "unset = Tock's self-describing frame")
    schema_registry_timeout: float = Field(default=120.0, gt=0, description="seconds a call to the schema "
                                           "registry is retried while it is unreachable")
    schema_ids: str | None = Field(default=None, description="internal: the schema ids a launching process "
                                   "knew, passed to the tries it starts")
    db_url: str | None = Field(default=None, description="SQLAlchemy URL of the projections; unset = SQLite in home")
    dags_folder: Path | None = Field(default=None, description="DAG files; unset = <home>/dags")
    parse_timeout: float = Field(default=30.0, gt=0, description="seconds one DAG file may take to parse")
    parse_parallelism: int = Field(default=2, ge=1, description="DAG files parsed at once")
    dag_scan_interval: float = Field(default=0.5, gt=0, description="seconds between scans of the DAGs folder")
    dag_reparse_interval: float = Field(default=30.0, gt=0, description="seconds after which a DAG file is parsed "
                                        "again even if its bytes are unchanged")
    dag_forced_reparse_every: int = Field(default=10, ge=1, le=10_000,
                                          description="a DAG file whose bytes and imported DAG-folder modules "
                                          "are unchanged is parsed again only every this many re-parse intervals "
                                          "(1: every interval)")
    parse_retry_backoff: float = Field(default=5.0, gt=0, description="seconds before a failed parse is retried; "
                                       "doubles per failure up to TOCK_DAG_REPARSE_INTERVAL")
    parallelism: int = Field(default=32, ge=1,
                             description="tries the local executor runs at once, counted from the log")
    warm_runners: int = Field(default=8, ge=0, le=1000,
                              description="runners the local executor keeps started and connected, ready for a try")
    preloaded_dag_files: int = Field(default=4, ge=0, le=64,
                                     description="DAG files the local executor keeps imported, each in a launcher of "
                                     "its own whose runners start tries with the file loaded already (0: each try "
                                     "imports its file)")
    task_heartbeat_seconds: float = Field(default=5.0, gt=0, description="seconds between task heartbeats")
    task_heartbeat_timeout: float = Field(default=60.0, gt=0, description="silence after which a try is dead")
    task_start_timeout: float = Field(default=600.0, gt=0, description="seconds a launched try may wait for its "
                                      "runner to start (a busy Celery queue, a pending pod) before it is dead")
    scheduler_session_timeout: float = Field(default=10.0, ge=6, le=300,
                                             description="seconds before a silent scheduler's partitions move")
    scheduler_snapshot_every_events: int = Field(
        default=100_000, ge=0, description="a scheduler snapshots a partition (to tock.snapshots, with its "
        "decisions) once it has folded this many records of it since the last snapshot; 0 = off")
    scheduler_snapshot_interval_seconds: float = Field(
        default=60.0, ge=0, description="a scheduler also snapshots a partition once this many seconds "
        "passed since its last snapshot with at least one record folded; 0 = off (both 0: no snapshots, "
        "every takeover replays the full history)")
    scheduler_finished_runs_kept: int = Field(
        default=100, ge=0, le=1_000_000, description="finished runs of each DAG a scheduler keeps (in memory and "
        "snapshots) for clear, mark and backfill; older ones are forgotten, and a command naming one is refused; "
        "a DAG's finished_runs_kept overrides it. Give every scheduler of an installation the same value")
    scheduler_request_ids_kept: int = Field(
        default=10_000, ge=1, le=10_000_000, description="request ids (Idempotency-Key) of the latest commands a "
        "scheduler remembers per partition: a command retried with its id is applied once while the id is among "
        "them (a trigger once for ever); one retried after that many newer commands is applied as a new one")
    task_log_ship_limit_bytes: int = Field(default=10 * 1024 * 1024, ge=0,
                                           description="bytes of a try's output shipped to tock.logs at most; "
                                                       "past it a truncation marker (the local file keeps all)")
    xcom_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=8 * 1024 * 1024,
                                description="bytes a try's values (return value and pushes), JSON-encoded, may "
                                            "take; more fails the try saying so (they travel in its TaskSucceeded)")
    task_env_allow: str = Field(
        default="PATH,HOME,USER,LOGNAME,SHELL,LANG,LANGUAGE,LC_*,TZ,TMPDIR,PYTHONPATH,VIRTUAL_ENV",
        pattern=r"^[A-Za-z0-9_.*?,\s-]*$",
        description="comma-separated names (fnmatch patterns) of the environment variables a try's user code "
                    "inherits from its runner; never a TOCK_* setting, whatever this says (TOCKRUN_* name the try)")
    task_log_retention_hours: float = Field(default=7 * 24.0, gt=0,
                                            description="hours tock.logs keeps task log lines (topic creation)")
    api_host: str = Field(default="127.0.0.1", description="API bind address")
    api_port: int = Field(default=8080, ge=1, le=65535, description="API port")
    api_token: str | None = Field(default=None, description="a bearer token that acts as an admin (scripts, "
                                  "bootstrapping); users get their own with `tock tokens create`")
    api_secret_key: str | None = Field(default=None, min_length=32,
                                       description="key signing web UI sessions and CSRF tokens; unset = a random "
                                                   "one per API process (sessions end when it restarts)")
    api_session_hours: float = Field(default=12.0, gt=0, le=24 * 30, description="hours a web UI login lasts")
    api_cookie_secure: bool | None = Field(default=None, description="mark the session cookie Secure; unset = "
                                           "when the request came over HTTPS (set true behind a TLS proxy)")
    api_login_attempts: int = Field(default=5, ge=1, description="wrong passwords per user and address within "
                                    "TOCK_API_LOGIN_WINDOW before logins are refused (429) for the window")
    api_login_window: float = Field(default=300.0, gt=0, description="seconds of the wrong-password window")
    api_log_follows_per_user: int = Field(default=4, ge=1, le=1000,
                                          description="task log follows (?follow=true) one user holds open at "
                                                      "once; more are refused (429)")
    api_log_follow_seconds: float = Field(default=3600.0, gt=0, le=7 * 24 * 3600.0,
                                          description="seconds a task log follow streams at most before it ends "
                                                      "(the client asks again to read on)")
    api_trusted_proxies: str = Field(default="", pattern=r"^[0-9A-Za-z.:_,\s-]*$",
                                     description="comma-separated addresses of reverse proxies whose "
                                                 "X-Forwarded-For names the client (login limits key on it)")
    api_conf_limit_bytes: int = Field(default=256 * 1024, ge=2, le=6 * 1024 * 1024,
                                      description="bytes of a trigger's or backfill's conf as JSON at most; a "
                                                  "larger one is refused (422): a command is one Kafka record, "
                                                  "and the producer and broker take 1 MB by default; at most "
                                                  "6 MiB, what each try's context carries of a conf")
    monitor_host: str = Field(default="127.0.0.1", description="bind address of the monitor's JSON tables")
    monitor_port: int = Field(default=8090, ge=1, le=65535, description="port of the monitor's JSON tables")
    monitor_session_timeout: float = Field(default=10.0, ge=6, le=300,
                                           description="seconds before a silent monitor's partitions move")
    asset_watcher_session_timeout: float = Field(
        default=10.0, ge=6, le=300, description="seconds before a silent asset watcher's partitions move (and "
                                                "its open transaction is aborted)")
    monitor_callback_timeout: float = Field(default=30.0, gt=0, le=600,
                                            description="seconds a module:function callback may run in its "
                                                        "subprocess before it is killed (each attempt)")
    monitor_snapshot_every_events: int = Field(
        default=50_000, ge=0, description="a monitor snapshots a partition's fold (to tock.snapshots, with its "
        "consumed offsets) once it has folded this many records of it since the last snapshot; 0 = off")
    monitor_snapshot_interval_seconds: float = Field(
        default=60.0, ge=0, description="a monitor also snapshots a partition once this many seconds passed "
        "since its last snapshot with at least one record folded; 0 = off (both 0: every takeover replays the "
        "full history)")
    projector_batch: int = Field(default=20_000, ge=1,
                                 description="records the projector commits per DB transaction at most")
    celery_broker_url: str = Field(default="redis://127.0.0.1:6379/0", description="Celery broker (Redis)")
    celery_default_queue: str = Field(default="default", pattern=r"^[A-Za-z0-9._-]+$",
                                      description="queue of a Celery worker started without --queues")
    celery_visibility_timeout: float = Field(
        default=3600.0, gt=0, description="seconds before Redis gives an unacknowledged Celery message to another "
                                          "worker (a redelivered try is refused by the claim)")
    celery_parallelism: int = Field(default=64, ge=1, description="tries the Celery executor runs at once, "
                                                                  "counted from the log")
    kubeconfig: Path | None = Field(default=None, description="kubeconfig of the Kubernetes cluster; unset = the "
                                    "local API server of `tock kube start` (<home>/kube/kubeconfig)")
    kube_namespace: str = Field(default="tock", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                description="namespace of the Kubernetes executor's pods")
    kube_image: str = Field(default="tock:latest", description="image of a try's pod (pod_override may change it)")
    kube_apiserver_port: int = Field(default=6443, ge=1, le=65535, description="local kube-apiserver port")
    kube_etcd_port: int = Field(default=2379, ge=1, le=65535, description="local etcd client port (peer: +1)")
    kube_cache: Path = Field(default=Path.home() / ".cache" / "tock" / "kube",
                             description="where infra/scripts/build-kube.sh keeps kube-apiserver and etcd")
    kube_parallelism: int = Field(default=64, ge=1, description="tries the Kubernetes executor runs at once, "
                                                                "counted from the log")
    kube_request_timeout: float = Field(default=10.0, gt=0, le=300,
                                        description="seconds any Kubernetes API request may take (connect, then "
                                                    "read) before it counts as failed and is tried again later; a "
                                                    "watch waits this much longer than its server-side timeout")
    metrics_host: str = Field(default="127.0.0.1", description="address the services' metrics endpoints bind "
                              "(0.0.0.0 to be scraped from other hosts, e.g. in Kubernetes)")
    scheduler_metrics_port: int = Field(default=0, ge=0, le=65535, description="port of the scheduler's "
                                        "Prometheus /metrics; 0 = off (`tock standalone` sets 9101)")
    dag_processor_metrics_port: int = Field(default=0, ge=0, le=65535, description="port of the DAG "
                                            "processor's Prometheus /metrics; 0 = off (standalone: 9102)")
    projector_metrics_port: int = Field(default=0, ge=0, le=65535, description="port of the projector's "
                                        "Prometheus /metrics; 0 = off (standalone: 9103)")
    standalone_metrics_port: int = Field(default=9101, ge=0, le=65533, description="`tock standalone` serves "
                                         "the scheduler's, DAG processor's and projector's metrics on this port "
                                         "and the next two (unless their own port is set); 0 = off")
    fernet_key: str | None = Field(default=None, description="Fernet key (urlsafe base64 of 32 bytes) encrypting "
                                   "the variables and connections of Tock's store (tock.secrets); unset = the key "
                                   "in <home>/fernet.key (`tock standalone` writes one the first time)")
    secrets_file: Path | None = Field(default=None, description="a JSON or YAML file of variables and "
                                      "connections (`variables:` and `connections:`), looked up after the "
                                      "TOCK_VAR_*/TOCK_CONN_* variables")
    secrets_kube_namespace: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                               description="namespace whose Secrets tock-variable-<key> and "
                                                           "tock-connection-<conn_id> are looked up after the "
                                                           "secrets file; unset = not at all")
    # -- OpenLineage emitter (`tock lineage`, services/lineage) -----------------------------------------
    lineage_transport: Literal["kafka", "file", "http"] = Field(
        default="kafka", description="where `tock lineage` sends OpenLineage run events: a Kafka topic (exactly "
                                     "once, in transactions with its consumed offsets), a file of JSON lines (exactly "
                                     "once: one emitter per file), or an HTTP endpoint (at least once, identical "
                                     "bytes on a repeat)")
    lineage_namespace: str = Field(default="tock", min_length=1, max_length=200,
                                   description="OpenLineage job namespace of every DAG and task job")
    lineage_topic: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$",
                                      description="Kafka topic of the lineage events, named as it is (no prefix "
                                                  "added); unset = <TOCK_TOPIC_PREFIX>tock.lineage")
    lineage_file: Path | None = Field(default=None, description="file the events are appended to, one JSON per "
                                      "line; unset = <home>/lineage/openlineage.jsonl")
    lineage_url: str | None = Field(default=None, description="base URL of the OpenLineage HTTP endpoint (e.g. "
                                    "Marquez: http://127.0.0.1:5000); required with TOCK_LINEAGE_TRANSPORT=http")
    lineage_http_endpoint: str = Field(default="api/v1/lineage", description="path of the HTTP endpoint under "
                                       "TOCK_LINEAGE_URL")
    lineage_http_timeout: float = Field(default=5.0, gt=0, le=300, description="seconds one HTTP delivery may take")
    lineage_session_timeout: float = Field(default=10.0, ge=6, le=300,
                                           description="seconds before a silent Kafka-transport emitter's partitions "
                                                       "move (and its open transaction is aborted)")
    # -- end of the OpenLineage emitter's settings ------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    executors: str = Field(default="local,celery", pattern=r"^[a-z]+(,[a-z]+)*$",
                           description="executors this installation runs, comma-separated; a task on another "
                                       "is a parse error")
    hostname: str | None = Field(default=None, description="this host's name in handles, runner ids and claims; "
                                 "unset = the machine's host name (set it to run several simulated hosts on one)")
    fault_stop_before_commit: Path | None = Field(
        default=None, description="fault injection for tests only: while this file exists, a scheduler or "
                                  "monitor stops itself (SIGSTOP) between sending its offsets and committing its "
                                  "transaction (if the file names an event type: a transaction writing one)")

    @property
    def available_executors(self) -> tuple[str, ...]:
        """The executors tasks may name (``executors``, split)."""
        return tuple(self.executors.split(","))

    @property
    def executor_parallelism(self) -> dict[str, int]:
        """Tries each executor runs at once."""
        return {"local": self.parallelism, "celery": self.celery_parallelism, "kubernetes": self.kube_parallelism}

    @property
    def host(self) -> str:
        """This host's name: the ``hostname`` setting, or the machine's."""
        return self.hostname or socket.gethostname()

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, **_others):  # noqa: D102
        # load_settings() reads and checks the environment itself, once; the model
        # only validates what it is given.
        return (init_settings,)

    @model_validator(mode="after")
    def _ports_differ(self) -> Settings:
        problem = port_problem(self.broker_port, self.controller_port, self.local_broker_nodes)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def local_broker_nodes(self) -> int:
        """Node count of the local broker (1 unless set or remembered)."""
        return self.broker_nodes or 1

    @property
    def bootstrap(self) -> str:
        """Where clients connect: the configured cluster, or every node of the local broker (a client
        that starts while one node is down still finds the others)."""
        clients, _controllers = local_ports(self.broker_port, self.controller_port, self.local_broker_nodes)
        return self.kafka_bootstrap or ",".join(f"127.0.0.1:{port}" for port in clients)

    @property
    def uses_local_broker(self) -> bool:
        return self.kafka_bootstrap is None

    @property
    def resolved_dags_folder(self) -> Path:
        return self.dags_folder or self.home / "dags"

    @property
    def resolved_kubeconfig(self) -> Path:
        return self.kubeconfig or self.home / "kube" / "kubeconfig"

    @property
    def resolved_db_url(self) -> str:
        return self.db_url or f"sqlite:///{self.home / 'tock.db'}"


def local_ports(broker_port: int, controller_port: int | None, nodes: int) -> tuple[list[int], list[int]]:
    """Client and controller ports of the local broker's nodes 1..nodes: consecutive from
    TOCK_BROKER_PORT, and from TOCK_CONTROLLER_PORT (unset: right after the client ports)."""
    first_controller = broker_port + nodes if controller_port is None else controller_port
    return ([broker_port + index for index in range(nodes)],
            [first_controller + index for index in range(nodes)])


def port_problem(broker_port: int, controller_port: int | None, nodes: int) -> str | None:
    """Why these ports cannot serve ``nodes`` local nodes (overlap, past 65535), or None."""
    clients, controllers = local_ports(broker_port, controller_port, nodes)
    if max(clients + controllers) > 65535:
        return (f"{nodes} node(s) from TOCK_BROKER_PORT={broker_port} / controller port {controllers[0]} "
                "run past port 65535")
    shared = sorted(set(clients) & set(controllers))
    if shared:
        return (f"the local broker's client ports {_span(clients)} (TOCK_BROKER_PORT + node-1) and controller "
                f"ports {_span(controllers)} (TOCK_CONTROLLER_PORT + node-1) overlap on {shared}; "
                f"set TOCK_CONTROLLER_PORT to {clients[-1] + 1} or more, or unset it")
    return None


def _span(ports: list[int]) -> str:
    return str(ports[0]) if len(ports) == 1 else f"{ports[0]}-{ports[-1]}"


def remembered_broker_nodes(home: Path) -> int | None:
    """The node count the local broker under ``home`` was formatted with, if it remembers one."""
    try:
        return int((home / BROKER_NODES_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def known_variables() -> set[str]:
    """Names of every TOCK_* variable Tock understands."""
    return {ENV_PREFIX + name.upper() for name in Settings.model_fields}


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate settings once. Unknown TOCK_* variables are an error naming them."""
    environ = os.environ if environ is None else environ
    ours = {key: value for key, value in environ.items()
            if key.startswith(ENV_PREFIX) and not key.startswith(SECRET_ENV_PREFIXES)}
    unknown = sorted(set(ours) - known_variables())
    if unknown:
        raise SettingsError(
            f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known_variables()))}"
        )
    values = _drop_empty({key[len(ENV_PREFIX):].lower(): value for key, value in ours.items()})
    if "broker_nodes" not in values:
        # Read once here, like the environment: later commands and every client of a local
        # cluster know its node count (and so its bootstrap list) without being told again.
        remembered = remembered_broker_nodes(Path(values.get("home", Settings.model_fields["home"].default)))
        if remembered is not None:
            values["broker_nodes"] = str(remembered)
    try:
        return Settings(**values)
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None


def _drop_empty(values: dict[str, str]) -> dict[str, str]:
    # An empty TOCK_X= means "unset", as shells often export empty variables.
    return {key: value for key, value in values.items() if value != ""}


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        name = ENV_PREFIX + ".".join(str(part) for part in item["loc"]).upper()
        lines.append(f"{name}: {item['msg']}" if item["loc"] else item["msg"])
    return "invalid settings: " + "; ".join(lines)
