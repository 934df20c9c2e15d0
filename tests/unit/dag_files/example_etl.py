"""A tiny DAG file used by the authoring and DAG processor tests."""

from tock import DAG, BashTask, task

with DAG("example_etl", schedule="@daily", retries=1, tags=["example"]) as dag:

    @task
    def extract():
        return [1, 2, 3]

    @task(retries=3, retry_delay=10)
    def transform():
        return "transformed"

    load = BashTask("load", "echo loaded")
    notify = BashTask("notify", "echo done", queue="alerts")
    extracted = extract()
    transformed = transform()
    extracted >> transformed >> load
    [transformed, load] >> notify
