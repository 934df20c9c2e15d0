"""Dynamic task mapping: expand over a literal, over an upstream value, partial, expand_kwargs, map."""
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

with DAG("conf_mapping", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def square(x):
        return x * x

    @task
    def total(values):
        return sum(values)

    @task
    def numbers():
        return [1, 2, 3]

    @task
    def scaled(x, factor):
        return x * factor

    @task
    def pair(a, b):
        return f"{a}{b}"

    total(square.expand(x=[2, 4]))
    scaled.partial(factor=10).expand(x=numbers())
    pair.expand_kwargs([{"a": "x", "b": 1}, {"a": "y", "b": 2}])
    square.expand(x=numbers().map(lambda n: n + 1))
    BashOperator.partial(task_id="echoes").expand(bash_command=["echo one", "echo two"])
