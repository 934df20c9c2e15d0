"""Trigger rules over a failed, a skipped and a succeeded upstream. The skip runs after the failure (its
rule all_done), so every rule meets them in one order on any system: a rule that decides as soon as one
upstream ended (all_success, failed first) cannot depend on which ended first."""
from datetime import datetime

from airflow.exceptions import AirflowSkipException
from airflow.sdk import DAG, task
from airflow.utils.trigger_rule import TriggerRule

with DAG("conf_trigger_rules", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def ok():
        return 1

    @task(retries=0)
    def fails():
        raise ValueError("on purpose")

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def skips():
        raise AirflowSkipException("nothing to do")

    failing = fails()
    upstream = [ok(), failing, failing >> skips()]
    for rule in ("all_success", "all_failed", "all_done", "one_success", "one_failed", "none_failed",
                 "none_skipped", "all_skipped", "none_failed_min_one_success", "always", "one_done",
                 "all_done_min_one_success"):
        @task(task_id=f"rule_{rule}", trigger_rule=getattr(TriggerRule, rule.upper()))
        def judged():
            return "ran"

        upstream >> judged()
