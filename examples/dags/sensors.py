"""Sensors and a pool: wait for a file an upstream task writes, for a moment after the run's data
interval, and for a condition a function checks, each poke a short try and each wait a timer in the log
(no slot, no process held between pokes). The load step takes a slot of the pool ``examples``: run
`tock pools set examples 1` for it to be granted (until then it waits in ``scheduled``; `tock dags test`
applies no pool)."""

import os
import tempfile
from datetime import timedelta

from tock import DAG, FileSensor, PokeReturnValue, TimeDeltaSensor, task

DROP = os.path.join(tempfile.gettempdir(), "tock-example-drop.csv")

with DAG("example_sensors", tags=["example"]) as dag:

    @task
    def drop_file():
        with open(DROP, "w") as out:
            out.write("id,amount\n1,42\n")

    arrived = FileSensor(task_id="wait_for_file", filepath=DROP, poke_interval=1, timeout=120)
    settled = TimeDeltaSensor(task_id="wait_a_little", delta=timedelta(seconds=2), timeout=120)

    @task.sensor(poke_interval=1, timeout=60, soft_fail=True)
    def rows_ready() -> PokeReturnValue:
        with open(DROP) as source:
            rows = source.read().splitlines()[1:]
        return PokeReturnValue(is_done=bool(rows), xcom_value=len(rows))

    @task(pool="examples")
    def load(rows: int):
        print(f"loading {rows} row(s)")

    drop_file() >> arrived >> settled
    ready = rows_ready()
    settled >> ready
    load(ready)
