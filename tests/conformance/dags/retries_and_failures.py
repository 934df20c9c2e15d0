"""Retries (a try that fails once then succeeds), a failure that fails the run, and upstream_failed."""
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

with DAG("conf_retries_and_failures", start_date=datetime(2026, 1, 1), schedule=None, catchup=False,
         default_args={"retry_delay": timedelta(seconds=0)}):
    @task(retries=2)
    def flaky(ti=None):
        if ti.try_number < 2:
            raise ValueError("first try fails")
        return ti.try_number

    @task(retries=0)
    def broken():
        raise KeyError("missing")

    @task
    def after(value):
        return value

    flaky()
    after(broken())
