"""W2 for Airflow: a 50-task chain of no-op Python tasks (tests/benchmarks/bench_scheduler.py CHAIN)."""

from airflow.sdk import DAG, task


def noop():
    pass


with DAG("chain", schedule=None) as dag:
    previous = None
    for index in range(50):
        current = task(noop, task_id=f"step_{index:02d}")()
        if previous is not None:
            previous >> current
        previous = current
