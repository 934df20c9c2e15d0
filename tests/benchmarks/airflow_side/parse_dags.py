"""The parse workload's DAG files written for Airflow: the shape of bench_dag_processor.dag_source (TASKS Bash
tasks in a chain, hourly, one retry), in Airflow 3's syntax."""

from __future__ import annotations

from tests.benchmarks.bench_dag_processor import TASKS


def dag_source(dag_id: str, version: int = 0) -> str:
    lines = ["from airflow.providers.standard.operators.bash import BashOperator",
             "from airflow.sdk import DAG",
             "",
             f"with DAG({dag_id!r}, schedule='@hourly', default_args={{'retries': 1}}):"]
    lines += [f"    t{n} = BashOperator(task_id='t{n}', bash_command='echo {dag_id} {n} v{version}')"
              for n in range(TASKS)]
    lines += [f"    t{n} >> t{n + 1}" for n in range(TASKS - 1)]
    return "\n".join(lines) + "\n"
