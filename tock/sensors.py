"""Sensors, by Airflow's names: ``BaseSensorOperator`` (subclass it and write ``poke(context)``),
``PythonSensor``, ``FileSensor``, ``TimeDeltaSensor``, ``DateTimeSensor``, ``PokeReturnValue`` and
``@task.sensor`` (tock/decorators.py).

A sensor is a task whose try is a poke. In Tock's default mode, "reschedule", a poke whose condition is
not met ends its try at once (``TaskPoked``) and the owner of the run's partition writes when the next
poke comes (``TaskRescheduled``): the wait is a timer in the log, so a waiting sensor holds no worker
slot and no process, and a restart of anything loses none of it. Mode "poke" loops in one try as
Airflow's does, holding its slot. Either way the sensor gives up after ``timeout`` seconds from its first
poke (failed, not retried; skipped with ``soft_fail``). Airflow's default mode is "poke"; Tock's is
"reschedule", which is what Airflow's ``deferrable=True`` asks for, without a triggerer.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from schemas.dags import SENSOR_MODES, SENSOR_TIMEOUT, SensorDefinition, TimeWaitDefinition
from tock.tasks import TEMPLATE_FIELDS, Task, init_task, seconds_of

if TYPE_CHECKING:
    from tock.context import Context
    from tock.dag import DAG


@dataclass(frozen=True)
class PokeReturnValue:
    """What a poke may return (Airflow's): whether the condition is met, and the value the sensor passes
    on when it is (its return value, for the tasks downstream)."""

    is_done: bool
    xcom_value: Any = None

    def __bool__(self) -> bool:
        return bool(self.is_done)


def sensor_definition(name: str, *, poke_interval: Any = 60.0, timeout: Any = SENSOR_TIMEOUT, soft_fail: Any = False,
                      mode: Any = "reschedule", exponential_backoff: Any = False, max_wait: Any = None,
                      deferrable: Any = False) -> SensorDefinition:
    """The sensor's waiting settings, checked (a mistake is a ValueError naming the sensor and the setting).
    ``deferrable=True`` (Airflow's way to wait without a slot) is mode "reschedule", which already does."""
    for flag, value in (("soft_fail", soft_fail), ("exponential_backoff", exponential_backoff),
                        ("deferrable", deferrable)):
        if not isinstance(value, bool):
            raise ValueError(f"sensor {name!r}: {flag} must be True or False, got {value!r}")
    if mode not in SENSOR_MODES:
        raise ValueError(f"sensor {name!r}: mode must be one of {', '.join(map(repr, SENSOR_MODES))}, got {mode!r}")
    if deferrable and mode == "poke":
        raise ValueError(f"sensor {name!r}: deferrable=True waits without holding a slot, mode='poke' holds one: "
                         "choose one")
    if poke_interval is None or timeout is None:
        raise ValueError(f"sensor {name!r}: poke_interval and timeout must be seconds or a timedelta, not None")
    interval = seconds_of(poke_interval, f"sensor {name!r}: poke_interval")
    limit = seconds_of(timeout, f"sensor {name!r}: timeout")
    most = seconds_of(max_wait, f"sensor {name!r}: max_wait")
    assert interval is not None and limit is not None  # given (checked above)
    return SensorDefinition(poke_interval=interval, timeout=limit, soft_fail=soft_fail,
                            exponential_backoff=exponential_backoff, max_wait=most, mode=mode)


class BaseSensorOperator(Task):
    """Airflow's base of sensors: subclass it and write ``poke(self, context)``, returning True (or a
    ``PokeReturnValue``) when the condition is met. Its ``template_fields`` are rendered onto the sensor
    before each poke. Settings (Airflow's): ``poke_interval`` (seconds or a timedelta, default 60),
    ``timeout`` (default a week), ``soft_fail``, ``mode`` ("reschedule", Tock's default, or "poke"),
    ``exponential_backoff``, ``max_wait``, ``silent_fail`` (an error in a poke counts as not met),
    ``never_fail`` (an error in a poke, or the timeout, ends it skipped); the task options as for ``@task``."""

    template_fields: tuple[str, ...] = ()  # a class's own, as Airflow's operators have
    template_ext: tuple[str, ...] = ()
    task_kind: ClassVar[str] = "sensor"  # "external_sensor": decided by the scheduler, with no poke

    def __init__(self, *, task_id: str, poke_interval: float | timedelta = 60.0,
                 timeout: float | timedelta = SENSOR_TIMEOUT, soft_fail: bool = False, mode: str = "reschedule",
                 exponential_backoff: bool = False, max_wait: float | timedelta | None = None,
                 silent_fail: bool = False, never_fail: bool = False, deferrable: bool = False,
                 dag: DAG | None = None, **options: Any) -> None:
        for flag, value in (("silent_fail", silent_fail), ("never_fail", never_fail)):
            if not isinstance(value, bool):
                raise ValueError(f"sensor {task_id!r}: {flag} must be True or False, got {value!r}")
        self.silent_fail, self.never_fail = silent_fail, never_fail
        definition = sensor_definition(task_id, poke_interval=poke_interval, timeout=timeout,
                                       soft_fail=soft_fail or never_fail, mode=mode,
                                       exponential_backoff=exponential_backoff, max_wait=max_wait,
                                       deferrable=deferrable)
        init_task(self, dag, task_id, self._kind(), options, sensor=definition, **self._callable_fields())

    def _kind(self) -> str:
        return self.task_kind

    def _callable_fields(self) -> dict[str, Any]:
        return {}

    @property
    def poke_interval(self) -> float:
        return self._settings.poke_interval

    @property
    def timeout(self) -> float:
        return self._settings.timeout

    @property
    def soft_fail(self) -> bool:
        return self._settings.soft_fail

    @property
    def mode(self) -> str:
        return self._settings.mode

    @property
    def _settings(self) -> SensorDefinition:
        assert self.sensor is not None  # a sensor has its settings
        return self.sensor

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """Whether the condition is met now. Subclasses write it."""
        raise NotImplementedError(f"{type(self).__name__} must define poke(self, context)")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dag.dag_id}.{self.task_id}>"


class PythonSensor(BaseSensorOperator):
    """``PythonSensor(task_id, python_callable, op_args=..., op_kwargs=..., templates_dict=...)``: pokes by
    calling ``python_callable`` (with the context keys it names, as ``PythonOperator``); met when it
    returns a truthy value or ``PokeReturnValue(True, ...)``."""

    template_fields = TEMPLATE_FIELDS["python"]

    def __init__(self, *, task_id: str, python_callable: Callable[..., Any], op_args: Iterable[Any] | None = None,
                 op_kwargs: dict[str, Any] | None = None, templates_dict: dict[str, Any] | None = None,
                 **settings: Any) -> None:
        if not callable(python_callable):
            raise TypeError(f"PythonSensor {task_id!r}: python_callable must be callable, got {python_callable!r}")
        if op_kwargs is not None and not isinstance(op_kwargs, dict):
            raise TypeError(f"PythonSensor {task_id!r}: op_kwargs must be a dict, got {op_kwargs!r}")
        self._call = {"python_callable": python_callable, "args": tuple(op_args or ()), "kwargs": dict(op_kwargs or {})}
        if templates_dict is not None:
            settings["templates_dict"] = templates_dict
        super().__init__(task_id=task_id, **settings)

    def _callable_fields(self) -> dict[str, Any]:
        return self._call


DEFAULT_FS_CONN = "fs_default"


class FileSensor(BaseSensorOperator):
    """``FileSensor(task_id, filepath, fs_conn_id="fs_default", recursive=False)``: met when ``filepath``
    (a glob, templated) names a file, or a folder with a file in it. A relative path is relative to the
    ``path`` extra of the connection ``fs_conn_id`` names; ``fs_default`` (Airflow's, with no path) is
    not looked up."""

    template_fields = ("filepath",)

    def __init__(self, *, task_id: str, filepath: str | os.PathLike[str], fs_conn_id: str = DEFAULT_FS_CONN,
                 recursive: bool = False, **settings: Any) -> None:
        if not isinstance(filepath, str | os.PathLike) or not str(filepath):
            raise ValueError(f"FileSensor {task_id!r}: filepath must be a non-empty path, got {filepath!r}")
        self.filepath, self.fs_conn_id, self.recursive = str(filepath), fs_conn_id, bool(recursive)
        super().__init__(task_id=task_id, **settings)

    def poke(self, context: Context) -> bool:
        path = os.path.join(self._base(), self.filepath)
        print(f"poking for file {path}", flush=True)
        for found in glob.glob(path, recursive=self.recursive):
            if os.path.isfile(found):
                return True
            if any(files for _root, _dirs, files in os.walk(found)):
                return True
        return False

    def _base(self) -> str:
        from tock.connections import BaseHook

        if self.fs_conn_id == DEFAULT_FS_CONN:
            return ""  # Airflow's fs_default has no path: not looked up (a poke reads no secret store)
        return str(BaseHook.get_connection(self.fs_conn_id).extra_dejson.get("path", ""))


class _TimeSensor(BaseSensorOperator):
    """A sensor met once a moment has passed. When the moment is known in the DAG file (a delta after
    the data interval, a fixed datetime) it is a timer of the scheduler's: no poke, no try (kind
    "time_sensor", services/scheduler/core/time_sensors.py). A templated moment is rendered by a poke,
    which asks to be poked again at that moment: two short tries however long it waits."""

    def target(self, context: Context) -> datetime:
        raise NotImplementedError

    def poke(self, context: Context) -> bool:
        from tock.exceptions import AirflowRescheduleException

        moment = self.target(context)
        if moment.tzinfo is None:
            raise ValueError(f"sensor {self.task_id!r}: its target {moment.isoformat()} has no time zone")
        if datetime.now(moment.tzinfo) >= moment:
            return True
        print(f"waiting until {moment.isoformat()}", flush=True)
        raise AirflowRescheduleException(moment)


class TimeDeltaSensor(_TimeSensor):
    """``TimeDeltaSensor(task_id, delta)``: met ``delta`` after the run's data interval ends (its
    logical date for a run without one)."""

    task_kind = "time_sensor"

    def __init__(self, *, task_id: str, delta: timedelta, **settings: Any) -> None:
        if not isinstance(delta, timedelta):
            raise ValueError(f"TimeDeltaSensor {task_id!r}: delta must be a timedelta, got {delta!r}")
        self.delta = delta
        super().__init__(task_id=task_id, **settings)

    def _callable_fields(self) -> dict[str, Any]:
        return {"time_wait": TimeWaitDefinition(delta=self.delta.total_seconds())}

    def target(self, context: Context) -> datetime:
        start = context.get("data_interval_end") or context.get("logical_date")
        if not isinstance(start, datetime):
            raise ValueError(f"TimeDeltaSensor {self.task_id!r}: the run has no data interval or logical date")
        return start + self.delta


class DateTimeSensor(_TimeSensor):
    """``DateTimeSensor(task_id, target_time)``: met once ``target_time`` (a datetime, or a
    template rendering to an ISO 8601 moment) has passed."""

    template_fields = ("target_time",)

    def __init__(self, *, task_id: str, target_time: str | datetime, **settings: Any) -> None:
        if isinstance(target_time, datetime):
            target_time = target_time.isoformat()
        if not isinstance(target_time, str):
            raise TypeError(f"DateTimeSensor {task_id!r}: target_time must be a datetime or a string, "
                            f"got {target_time!r}")
        self.target_time = target_time
        self._fixed: datetime | None = None
        if "{{" not in target_time and "{%" not in target_time:  # known now: a timer, no poke
            try:
                self._fixed = _aware(datetime.fromisoformat(target_time), task_id)
            except ValueError:
                raise ValueError(f"DateTimeSensor {task_id!r}: target_time {target_time!r} is not an ISO 8601 "
                                 "moment (or a template)") from None
        super().__init__(task_id=task_id, **settings)

    def _kind(self) -> str:
        return "time_sensor" if self._fixed is not None else "sensor"

    def _callable_fields(self) -> dict[str, Any]:
        return {"time_wait": TimeWaitDefinition(target=self._fixed.timestamp())} if self._fixed is not None else {}

    def target(self, context: Context) -> datetime:
        return _aware(datetime.fromisoformat(str(self.target_time)), self.task_id)


def _aware(moment: datetime, task_id: str) -> datetime:
    """A naive moment is UTC (Airflow's default time zone)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
