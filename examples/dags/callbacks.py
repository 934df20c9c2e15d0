"""Task and DAG callbacks, with Airflow's names: `tock monitor` calls these functions (in a process of
its own, with the context the log holds) when a task starts, is retried, fails or succeeds, and when
the run ends. Each writes a line to tock-callbacks-example.log in the system's temp folder;
`tock tasks history` lists each call as a CallbackCalled.
"""

import json
import os
import tempfile
from pathlib import Path

from tock import DAG, task

JOURNAL = Path(tempfile.gettempdir()) / "tock-callbacks-example.log"


def note(context):
    """A task's callback: what happened to which try."""
    ti = context["ti"]
    line = {"trigger": context["trigger"], "task": ti.task_id, "try": ti.try_number, "state": ti.state,
            "why": context.get("exception") or context.get("reason")}
    with JOURNAL.open("a") as journal:
        journal.write(json.dumps(line) + "\n")


def run_ended(context):
    """The DAG's callback: the run's outcome."""
    run = context["dag_run"]
    with JOURNAL.open("a") as journal:
        journal.write(json.dumps({"run": run.run_id, "state": run.state}) + "\n")


with DAG("example_callbacks", tags=["example"], on_success_callback=run_ended, on_failure_callback=run_ended,
         default_args={"on_failure_callback": note, "on_retry_callback": note, "retries": 1, "retry_delay": 1}) as dag:

    @task(on_execute_callback=note, on_success_callback=note)
    def flaky():
        marker = Path(tempfile.gettempdir()) / f"tock-callbacks-{os.environ['TOCKRUN_RUN_ID']}"
        if not marker.exists():
            marker.write_text("first try failed\n")
            raise RuntimeError("failing on purpose the first time")  # on_retry_callback
        print("second try: succeeding")  # on_success_callback

    @task(on_success_callback=[note])
    def report():
        print("reported")

    flaky() >> report()  # then the run succeeds: on_success_callback of the DAG
