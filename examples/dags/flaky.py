"""A task that fails on its first try and succeeds on the retry.

It remembers that it ran in a file under the system's temp folder named after the run,
so the retry (a new process) finds it.
"""

import os
import tempfile
from pathlib import Path

from tock import DAG, task

with DAG("example_flaky", tags=["example"], retries=2, retry_delay=1) as dag:

    @task
    def flaky():
        marker = Path(tempfile.gettempdir()) / f"tock-flaky-{os.environ['TOCKRUN_RUN_ID']}"
        if not marker.exists():
            marker.write_text("first try failed\n")
            raise RuntimeError("flaky: failing on purpose the first time")
        print("second try: succeeding")

    @task
    def after():
        print("ran after the flaky task")

    flaky() >> after()
