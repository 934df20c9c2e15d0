"""W1 for Airflow: 200 independent no-op Python tasks (tests/benchmarks/bench_scheduler.py FAN_OUT)."""

from airflow.sdk import DAG, task


def noop():
    pass


with DAG("fan_out", schedule=None, max_active_tasks=64) as dag:
    for index in range(200):
        task(noop, task_id=f"noop_{index}")()
