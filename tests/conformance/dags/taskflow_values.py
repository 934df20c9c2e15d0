"""TaskFlow values: a return value, multiple_outputs, a key of an upstream value, xcom_push / xcom_pull."""
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("conf_taskflow_values", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def extract():
        return {"a": 3, "b": 4}

    @task(multiple_outputs=True)
    def split(numbers: dict):
        return {"total": sum(numbers.values()), "count": len(numbers)}

    @task
    def mean(total, count):
        return total / count

    @task
    def pushes(ti=None):
        ti.xcom_push(key="side", value=["x", 1])
        return "main"

    @task
    def pulls(ti=None):
        return [ti.xcom_pull(task_ids="pushes"), ti.xcom_pull(task_ids="pushes", key="side")]

    parts = split(extract())
    mean(parts["total"], parts["count"])
    pushes() >> pulls()
