"""A templated Bash task and a Python task that pulls a value: Jinja fields rendered with the run's
context ({{ ds }}, params, the trigger's conf, Airflow's macros), the rendering kept with the try."""

from tock import DAG, BashTask, task

with DAG("example_templated", tags=["example", "templating"], params={"region": "eu"}) as dag:

    count = BashTask("count_rows", "echo 'counting {{ params.region }} for {{ ds }}'; echo 42")

    @task
    def check(rows: str, ti=None):
        """``rows`` is count_rows's last line of output; xcom_pull reads the same value."""
        assert rows == ti.xcom_pull(task_ids="count_rows")
        return int(rows)

    report = BashTask("report",
                      "echo \"{{ params.region }}: {{ ti.xcom_pull(task_ids='check') }} rows on {{ ds }}, "
                      "next day {{ macros.ds_add(ds, 1) }}\"",
                      env={"RUN": "{{ run_id }}"}, append_env=True)

    check(count) >> report
