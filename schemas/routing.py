"""How an event is routed: the record key it is written under and the key that picks its partition.

Each declaration names one of the rules below (``@event(EVENTS, route=BY_DAG)``); ``routing_key``
in ``infra.log`` reads it. The partition key is the dag_id wherever there is one, so partition p of
every scheduling topic concerns the same DAGs. The keys are part of the data: records already in the
logs and in compacted topics are found by them, so a rule's output never changes.

Each rule reads its fields through a protocol, so mypy refuses a rule on an event that lacks them
(the ``@event`` call does not type-check), and ``event()`` checks the same at declaration time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

Routed = TypeVar("Routed", contravariant=True)


@dataclass(frozen=True, slots=True)
class Route(Generic[Routed]):
    """A routing rule: ``keys(event)`` is (record key, partition key); ``fields`` are the fields it reads."""

    name: str
    fields: tuple[str, ...]
    keys: Callable[[Routed], tuple[str, str]]

    def __repr__(self) -> str:
        return f"<route {self.name}>"


def try_log_key(dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
    """The record key of a try's log records (a mapped task's instance N: ``...|try|N``)."""
    key = f"{dag_id}|{run_id}|{task_id}|{try_number}"
    return key if map_index < 0 else f"{key}|{map_index}"


class OfDag(Protocol):
    @property
    def dag_id(self) -> str: ...


class OfTaskInstance(OfDag, Protocol):
    @property
    def run_id(self) -> str: ...

    @property
    def task_id(self) -> str: ...


class OfMappedTaskInstance(OfTaskInstance, Protocol):
    @property
    def map_index(self) -> int: ...


class OfTry(OfMappedTaskInstance, Protocol):
    @property
    def try_number(self) -> int: ...


class OfFile(Protocol):
    @property
    def file_path(self) -> str: ...


class OfScheduler(Protocol):
    @property
    def scheduler_id(self) -> str: ...


class OfWorker(Protocol):
    @property
    def worker(self) -> str: ...


class OfUser(Protocol):
    @property
    def username(self) -> str: ...


class OfVariable(Protocol):
    @property
    def key(self) -> str: ...


class OfConnection(Protocol):
    @property
    def conn_id(self) -> str: ...


class OfPool(Protocol):
    @property
    def pool(self) -> str: ...


class OfAsset(Protocol):
    @property
    def uri(self) -> str: ...


def _by_dag(event: OfDag) -> tuple[str, str]:
    return event.dag_id, event.dag_id


def _by_task_instance(event: OfMappedTaskInstance) -> tuple[str, str]:
    # Compaction of tock.heartbeats keeps the latest per task instance; an instance of a mapped task
    # has its map index in the key (an unmapped one keeps the key it always had).
    key = f"{event.dag_id}|{event.run_id}|{event.task_id}"
    return (key if event.map_index < 0 else f"{key}|{event.map_index}"), event.dag_id


def _by_try(event: OfTry) -> tuple[str, str]:
    return try_log_key(event.dag_id, event.run_id, event.task_id, event.try_number, event.map_index), event.dag_id


def _by_file(event: OfFile) -> tuple[str, str]:
    return event.file_path, event.file_path


def _by_scheduler(event: OfScheduler) -> tuple[str, str]:
    return event.scheduler_id, event.scheduler_id


def _by_worker(event: OfWorker) -> tuple[str, str]:
    # Beside the schedulers' records in tock.schedulers: a worker named like a scheduler stays apart.
    return f"worker/{event.worker}", f"worker/{event.worker}"


def _by_user(event: OfUser) -> tuple[str, str]:
    return event.username, event.username


def _by_variable(event: OfVariable) -> tuple[str, str]:
    # Compaction of tock.secrets keeps the latest record of each variable and each connection.
    return f"variable/{event.key}", f"variable/{event.key}"


def _by_connection(event: OfConnection) -> tuple[str, str]:
    return f"connection/{event.conn_id}", f"connection/{event.conn_id}"


def _by_pool(event: OfPool) -> tuple[str, str]:
    # A pool's ledger lives on one partition of tock.events, whoever's DAGs use it: its owner grants.
    return f"pool/{event.pool}", f"pool/{event.pool}"


def pool_partition_key(pool: str) -> str:
    """The partition key of a pool's ledger (what :data:`BY_POOL` routes by)."""
    return f"pool/{pool}"


def _by_asset(event: OfAsset) -> tuple[str, str]:
    # An asset's ledger (its consumers, its events not handed on yet) lives on one partition of tock.events.
    return asset_partition_key(event.uri), asset_partition_key(event.uri)


def asset_partition_key(uri: str) -> str:
    """The partition key of an asset's ledger (what :data:`BY_ASSET` routes by)."""
    return f"asset/{uri}"


BY_DAG: Route[OfDag] = Route("dag", ("dag_id",), _by_dag)
"""Key and partition by dag_id (run and task lifecycle, commands, DAG definitions)."""
BY_TASK_INSTANCE: Route[OfMappedTaskInstance] = Route("task instance", ("dag_id", "run_id", "task_id", "map_index"),
                                                      _by_task_instance)
"""Key ``dag|run|task`` (heartbeats; ``dag|run|task|map_index`` for a mapped task's instance), partition by dag_id."""
BY_TRY: Route[OfTry] = Route("try", ("dag_id", "run_id", "task_id", "map_index", "try_number"), _by_try)
"""Key :func:`try_log_key` (task log lines), partition by dag_id."""
BY_FILE: Route[OfFile] = Route("file", ("file_path",), _by_file)
"""Key and partition by DAG file path (parsing events without a DAG)."""
BY_SCHEDULER: Route[OfScheduler] = Route("scheduler", ("scheduler_id",), _by_scheduler)
"""Key and partition by scheduler id (scheduler liveness)."""
BY_WORKER: Route[OfWorker] = Route("worker", ("worker",), _by_worker)
"""Key and partition ``worker/<name>`` (executor workers' liveness)."""
BY_USER: Route[OfUser] = Route("user", ("username",), _by_user)
"""Key and partition by user name (accounts and tokens)."""

BY_VARIABLE: Route[OfVariable] = Route("variable", ("key",), _by_variable)
"""Key and partition ``variable/<key>`` (Tock's own store of variables, tock.secrets)."""
BY_CONNECTION: Route[OfConnection] = Route("connection", ("conn_id",), _by_connection)
"""Key and partition ``connection/<conn_id>`` (Tock's own store of connections, tock.secrets)."""

BY_POOL: Route[OfPool] = Route("pool", ("pool",), _by_pool)
"""Key and partition ``pool/<name>`` (a pool's size and its ledger of slots asked, granted and released)."""

BY_ASSET: Route[OfAsset] = Route("asset", ("uri",), _by_asset)
"""Key and partition ``asset/<uri>`` (an asset's consumers and its events not handed to them yet)."""

ROUTES = (BY_DAG, BY_TASK_INSTANCE, BY_TRY, BY_FILE, BY_SCHEDULER, BY_WORKER, BY_USER, BY_VARIABLE, BY_CONNECTION,
          BY_POOL, BY_ASSET)
