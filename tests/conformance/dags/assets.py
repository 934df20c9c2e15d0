"""Assets: a task's outlets with the extra its code sets, an alias a task adds an event through, and an
EmptyOperator's outlet."""
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset, AssetAlias, task

orders = Asset(name="conformance_orders", uri="file:///conformance/orders.csv", group="conformance")
summary = Asset(name="conformance_summary", uri="file:///conformance/summary.csv")
reports = AssetAlias(name="conformance_reports")
marked = Asset(name="conformance_marked", uri="file:///conformance/marked")

with DAG("conf_assets", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task(outlets=[orders])
    def produce(outlet_events=None):
        outlet_events[orders].extra = {"rows": 3, "source": "conformance"}
        return 3

    @task(outlets=[reports])
    def report(rows, outlet_events=None):
        outlet_events[reports].add(summary, extra={"rows": rows})
        return "reported"

    done = EmptyOperator(task_id="done", outlets=[marked])
    report(produce()) >> done
