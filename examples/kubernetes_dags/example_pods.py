"""Three executors in one DAG: a local extract, a transform on a Celery worker, and two tasks in
pods of their own (one with a memory limit through pod_override). Run it with
`make run-kubernetes` (the local kube-apiserver and a node agent, the kubelet stand-in)."""

import socket

from tock import DAG, BashTask, task

with DAG("example_pods", tags=["example"], retries=1, retry_delay=2) as dag:

    @task
    def extract():
        print(f"extracting on {socket.gethostname()}")

    transform = BashTask("transform", "echo transforming on a Celery worker", executor="celery")

    @task(executor="kubernetes", pod_override={"resources": {"limits": {"memory": "256Mi"}}})
    def score():
        print("scoring in a pod of its own, within 256 MiB")

    report = BashTask("report", "echo report from pod $(hostname)", executor="kubernetes")

    extract() >> transform >> score() >> report
