"""One DAG on two executors: a local extract, transforms and a summary on Celery workers, a local load.

`make run` starts one Celery worker on the queue "default", where these tasks go;
you can route one elsewhere with queue="heavy" and `tock worker --queues heavy --hostname big-box`.
Each task's history (`tock tasks history`) shows where its try ran: executor, queue and host.
"""

import socket

from tock import DAG, BashTask, task

with DAG("example_mixed", tags=["example"], retries=1, retry_delay=2) as dag:

    @task
    def extract():
        print(f"extracting on the scheduler's host {socket.gethostname()}")

    @task(executor="celery")
    def transform_orders():
        print("transforming orders on a Celery worker")

    @task(executor="celery", queue="default")
    def transform_customers():
        print("transforming customers on a Celery worker")

    summary = BashTask("summary", "echo summary on $(hostname)", executor="celery")

    @task
    def load():
        print("loading, back on the local executor")

    extract() >> [transform_orders(), transform_customers()] >> summary >> load()
