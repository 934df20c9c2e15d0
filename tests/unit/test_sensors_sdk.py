"""Sensors as DAG files write them (issue 24): Airflow's names and settings, what the definition records,
what a poke comes to (services/runner/poking.py), and ``tock dags test`` waiting for a real file."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import SensorDefinition
from services.runner.poking import Poked, poke_once, poke_until_done
from tock import (
    DAG,
    AirflowRescheduleException,
    BaseSensorOperator,
    DateTimeSensor,
    FileSensor,
    PokeReturnValue,
    PythonSensor,
    TimeDeltaSensor,
    task,
)
from tock.exceptions import AirflowSkipException
from tock_cli.local_run import run_dag


def definition_of(dag: DAG, task_id: str) -> Any:
    return next(item for item in dag.to_definition("/dags/x.py").tasks if item.task_id == task_id)


def test_each_sensor_records_its_settings_in_its_definition():
    with DAG("sensing", schedule=None) as dag:
        @task.sensor(poke_interval=timedelta(seconds=5), timeout=60, soft_fail=True, exponential_backoff=True,
                     max_wait=40)
        def ready() -> bool:
            return True

        ready()
        FileSensor(task_id="file", filepath="/data/{{ ds }}.csv", mode="poke")
        PythonSensor(task_id="py", python_callable=lambda: True, poke_interval=2)
    assert definition_of(dag, "ready").kind == "sensor"
    assert definition_of(dag, "ready").sensor == SensorDefinition(poke_interval=5.0, timeout=60.0, soft_fail=True,
                                                                 exponential_backoff=True, max_wait=40.0)
    assert definition_of(dag, "file").sensor == SensorDefinition(mode="poke")  # Airflow's defaults: 60 s, a week
    assert definition_of(dag, "py").sensor.poke_interval == 2.0


@pytest.mark.parametrize("settings, message", [
    ({"mode": "smart"}, "mode must be one of"),
    ({"poke_interval": -1}, "poke_interval must not be negative"),
    ({"timeout": float("nan")}, "timeout must be a finite number"),
    ({"soft_fail": "yes"}, "soft_fail must be True or False"),
    ({"deferrable": True, "mode": "poke"}, "choose one"),
    ({"max_wait": "1h"}, "max_wait must be seconds or a timedelta"),
])
def test_a_wrong_setting_is_refused_saying_which(settings, message):
    with DAG("sensing", schedule=None), pytest.raises(ValueError, match=message):
        FileSensor(task_id="file", filepath="/x", **settings)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**9), st.text(max_size=3),
                 st.none(), st.booleans()),
       st.sampled_from(["poke", "reschedule", "smart", "", None]))
def test_any_interval_and_mode_is_accepted_or_refused_with_a_value_error(interval, mode):
    with DAG("sensing", schedule=None):
        try:
            sensor = FileSensor(task_id="file", filepath="/x", poke_interval=interval, mode=mode)
        except ValueError:
            return
    assert sensor.sensor is not None and sensor.sensor.poke_interval >= 0 and sensor.mode in ("poke", "reschedule")


class Counting(BaseSensorOperator):
    """A user's own sensor: met at its third poke, with a templated field rendered onto it."""

    template_fields = ("tag",)

    def __init__(self, *, tag: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tag = tag
        self.pokes = 0

    def poke(self, context: Any) -> PokeReturnValue:
        self.pokes += 1
        return PokeReturnValue(self.pokes >= 3, xcom_value=self.tag)


def test_a_subclass_keeps_its_own_arguments_and_template_fields():
    with DAG("sensing", schedule=None):
        sensor = Counting(task_id="count", tag="{{ ds }}", poke_interval=1)
    assert sensor.template_fields == ("tag",) and sensor.tag == "{{ ds }}" and sensor.poke_interval == 1.0


# -- what a poke comes to ----------------------------------------------------------------------

def sensor(mode: str = "reschedule", **flags: bool) -> Any:
    with DAG("sensing", schedule=None):
        made = FileSensor(task_id="file", filepath="/x", mode=mode, poke_interval=10, timeout=35, **flags)
    return made


@pytest.mark.parametrize("returned, expected", [
    (True, Poked(True)), (False, Poked(False)), ("yes", Poked(True)), (None, Poked(False)),
    (PokeReturnValue(True, {"rows": 3}), Poked(True, {"rows": 3})), (PokeReturnValue(False, 7), Poked(False)),
])
def test_a_poke_is_met_by_a_truthy_value_or_a_done_poke_return_value(returned, expected):
    assert poke_once(sensor(), lambda: returned) == expected


def test_a_poke_may_ask_for_its_next_moment():
    moment = datetime(2030, 1, 1, tzinfo=UTC)

    def later() -> bool:
        raise AirflowRescheduleException(moment)

    assert poke_once(sensor(), later) == Poked(False, reschedule_at=moment.timestamp())


def boom() -> bool:
    raise OSError("the share is down")


def test_an_error_fails_the_try_unless_the_sensor_says_otherwise():
    with pytest.raises(OSError):
        poke_once(sensor(), boom)
    assert poke_once(sensor(silent_fail=True), boom) == Poked(False)
    with pytest.raises(AirflowSkipException, match="never_fail"):
        poke_once(sensor(never_fail=True), boom)


def test_in_reschedule_mode_a_try_is_one_poke():
    calls: list[int] = []
    assert poke_until_done(sensor(), lambda: calls.append(1)) == Poked(False)
    assert calls == [1]


def test_in_poke_mode_the_try_pokes_at_each_interval_until_its_timeout():
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    result = poke_until_done(sensor("poke"), lambda: False, clock=lambda: now[0], sleep=sleep)
    assert result == Poked(False, timed_out=True)
    assert slept == [10.0, 10.0, 10.0, 5.0]  # the last poke at the timeout, 35 s after the first


def test_in_poke_mode_a_met_poke_ends_the_try():
    answers = iter([False, False, True])
    assert poke_until_done(sensor("poke"), lambda: next(answers), clock=lambda: 0.0, sleep=lambda _s: None).done


# -- tock dags test: the scheduler's own core and real waiting ------------------------------------

def test_dags_test_waits_for_a_file_that_appears(tmp_path: Path):
    target = tmp_path / "arrived.csv"
    with DAG("sensing", schedule=None) as dag:
        wait = FileSensor(task_id="file", filepath=str(target), poke_interval=0.2, timeout=30)

        @task
        def read() -> str:
            return target.read_text()

        wait >> read()
    threading.Timer(1.0, lambda: target.write_text("42")).start()
    started = time.monotonic()
    result = run_dag(dag)
    assert result.state == "success", result
    states = {instance.task_id: (instance.state, instance.try_number) for instance in result.task_instances}
    assert states["read"] == ("success", 1)
    assert states["file"][0] == "success" and states["file"][1] >= 3  # it poked several times, a try each
    assert time.monotonic() - started >= 1.0  # it waited for the file in real time


def test_dags_test_ends_a_sensor_at_its_timeout_as_its_soft_fail_says(tmp_path: Path):
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    with DAG("sensing", schedule=None, params={"when": soon}) as dag:
        FileSensor(task_id="never", filepath=str(tmp_path / "none"), poke_interval=0.2, timeout=1, soft_fail=True)
        TimeDeltaSensor(task_id="past", delta=timedelta(seconds=-5))
        DateTimeSensor(task_id="soon", target_time="{{ params.when }}", timeout=60)
    result = run_dag(dag)
    states = {instance.task_id: (instance.state, instance.try_number) for instance in result.task_instances}
    assert states["never"][0] == "skipped" and states["past"] == ("success", 1)
    assert states["soon"] == ("success", 2)  # one poke to learn the moment, one at it: no poke in between


def test_dags_test_runs_a_mapped_sensor_each_instance_waiting_on_its_own(tmp_path: Path):
    with DAG("sensing", schedule=None) as dag:
        @task.sensor(poke_interval=0.1, timeout=30)
        def wait_for(name: str) -> PokeReturnValue:
            path = tmp_path / name
            there = path.exists()
            path.write_text(name)  # there at the next poke
            return PokeReturnValue(there, xcom_value=name.upper())

        @task
        def joined(values: list[str]) -> str:
            return "".join(values)

        joined(wait_for.expand(name=["a", "b", "c"]))
    result = run_dag(dag)
    assert result.state == "success"
    tries = {(instance.map_index, instance.try_number) for instance in result.task_instances
             if instance.task_id == "wait_for"}
    assert tries == {(0, 2), (1, 2), (2, 2)}
    [last] = [instance for instance in result.task_instances if instance.task_id == "joined"]
    assert '"ABC"' in last.values_json
