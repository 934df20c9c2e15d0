"""Task groups (ids prefixed) and setup / teardown around work that fails."""
from datetime import datetime

from airflow.sdk import DAG, task, task_group

with DAG("conf_groups_setup_teardown", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task_group
    def stage(n: int):
        @task
        def double(x):
            return x * 2

        @task
        def add_one(x):
            return x + 1

        return add_one(double(n))

    @task
    def total(a, b):
        return a + b

    total(stage(1), stage(10))

    @task
    def create():
        return "resource"

    @task(retries=0)
    def work(resource):
        raise RuntimeError(f"failing with {resource}")

    @task
    def delete():
        return "deleted"

    made = create()
    made >> work(made) >> delete().as_teardown(setups=made)
