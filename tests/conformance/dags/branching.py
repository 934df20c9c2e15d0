"""A branch, a short circuit, and what downstream of them runs."""
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task

with DAG("conf_branching", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task.branch
    def choose():
        return "left"

    @task
    def left():
        return "L"

    @task
    def right():
        return "R"

    join = EmptyOperator(task_id="join", trigger_rule="none_failed_min_one_success")
    choose() >> [left(), right()] >> join

    @task.short_circuit
    def gate():
        return False

    @task
    def behind():
        return "never"

    gate() >> behind()
