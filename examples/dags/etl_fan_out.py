"""A fan-out / fan-in ETL: extract, three transforms in parallel, then load and a report."""

from tock import DAG, BashTask, task

with DAG("example_etl", tags=["example"], retries=1, retry_delay=2) as dag:

    @task
    def extract():
        print("extracting 3 partitions")

    @task(task_id="transform_eu")
    def transform_eu():
        print("transforming eu")

    @task(task_id="transform_us")
    def transform_us():
        print("transforming us")

    @task(task_id="transform_asia")
    def transform_asia():
        print("transforming asia")

    @task
    def load():
        print("loading the three partitions")

    report = BashTask("report", "echo report for $TOCKRUN_RUN_ID")

    extract() >> [transform_eu(), transform_us(), transform_asia()] >> load() >> report
