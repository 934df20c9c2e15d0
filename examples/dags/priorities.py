"""Priorities and limits: six short checks compete for two slots (max_active_tasks=2), the urgent one
first (priority_weight), the slow API never twice at once across runs (max_active_tis_per_dag=1), a flaky
fetch retried with exponential backoff, and any run that takes over ten minutes failed (dagrun_timeout)."""

import random
from datetime import timedelta

from tock import DAG, BashTask, WeightRule, task

with DAG("example_priorities", tags=["example"], max_active_tasks=2, dagrun_timeout=timedelta(minutes=10),
         default_args={"retries": 1, "retry_delay": 1, "weight_rule": WeightRule.ABSOLUTE}) as dag:

    @task(priority_weight=10)
    def urgent_check():
        print("checked first: the highest priority")

    @task(max_active_tis_per_dag=1)
    def call_slow_api():
        print("one call at a time, whatever the number of runs")

    @task(retries=3, retry_delay=1, retry_exponential_backoff=True, max_retry_delay=timedelta(seconds=5))
    def flaky_fetch():
        if random.random() < 0.3:
            raise RuntimeError("the source hiccuped (retried after 1-2 s, then 2-4 s, at most 5 s)")
        return 42

    routine = [BashTask(f"routine_{number}", f"echo routine check {number}", priority_weight=number)
               for number in range(1, 4)]
    report = BashTask("report", "echo all checks done", weight_rule=WeightRule.DOWNSTREAM)

    [urgent_check(), call_slow_api(), flaky_fetch(), *routine] >> report
