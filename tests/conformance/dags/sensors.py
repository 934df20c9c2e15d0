"""Sensors: a poke not met then met (in each mode), a decorated sensor passing a value on, a sensor that
runs out of time with soft_fail (skipped, and what follows it), and a time sensor whose moment has passed."""
import os
import tempfile
from datetime import datetime, timedelta

from airflow.providers.standard.sensors.python import PythonSensor
from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
from airflow.sdk import DAG, PokeReturnValue, task


def _marker(name, run_id):
    return os.path.join(tempfile.gettempdir(), f"conformance-sensors-{name}-{run_id}".replace(":", "_"))


def met_on_second_poke(name, run_id=None):
    """The first poke leaves a mark and is not met; the next finds it (pokes may be other processes)."""
    marker = _marker(name, run_id)
    if os.path.exists(marker):
        return True
    open(marker, "w").close()
    return False


def never_met():
    return False


with DAG("conf_sensors", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def clean(run_id=None):
        for name in ("reschedule", "poke"):
            if os.path.exists(_marker(name, run_id)):
                os.remove(_marker(name, run_id))
        return "clean"

    rescheduled = PythonSensor(task_id="rescheduled", python_callable=met_on_second_poke,
                               op_kwargs={"name": "reschedule"}, mode="reschedule", poke_interval=1, timeout=120)
    poked = PythonSensor(task_id="poked", python_callable=met_on_second_poke, op_kwargs={"name": "poke"},
                         mode="poke", poke_interval=1, timeout=120)

    @task.sensor(poke_interval=1, timeout=120, mode="reschedule")
    def counted():
        return PokeReturnValue(is_done=True, xcom_value={"rows": 3})

    @task
    def use(rows):
        return rows["rows"] * 2

    # In poke mode, so that the try count does not depend on how long a poke takes (in reschedule mode each of
    # Tock's pokes is a try, and how many fit in the timeout is a matter of timing).
    timed_out = PythonSensor(task_id="timed_out", python_callable=never_met, mode="poke", poke_interval=1,
                             timeout=2, soft_fail=True)

    @task
    def after_timeout():
        return "never"

    waited = TimeDeltaSensor(task_id="waited", delta=timedelta(seconds=0))

    @task
    def after_wait():
        return "waited"

    clean() >> [rescheduled, poked]
    use(counted())
    timed_out >> after_timeout()
    waited >> after_wait()
