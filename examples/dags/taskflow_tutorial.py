"""TaskFlow, as Airflow's tutorial writes it: each task's return value is the next one's argument.

The values travel through the log: extract's dict is part of its TaskSucceeded, transform's try records
which extract try it read (its TaskQueued), and a restarted scheduler loses none of it. Try it here,
with no broker: ``tock dags test example_taskflow --file examples/dags/taskflow_tutorial.py``.
"""

import json

from tock import DAG, task

with DAG("example_taskflow", tags=["example", "taskflow"], params={"currency": "EUR"}) as dag:

    @task
    def extract():
        """Orders, as an upstream system would hand them over (a JSON string)."""
        return json.loads('{"1001": 301.27, "1002": 433.21, "1003": 502.22}')

    @task(multiple_outputs=True)
    def transform(order_data: dict):
        """The total, passed on under its own key (``summary["total_order_value"]`` below)."""
        return {"total_order_value": round(sum(order_data.values()), 2), "orders": len(order_data)}

    @task
    def load(total_order_value: float, params=None, ds=None):
        """Uses the value, the DAG's params (a trigger's conf overrides them) and the run's date."""
        print(f"{ds}: total order value is {total_order_value:.2f} {params['currency']}")
        return f"{total_order_value:.2f} {params['currency']}"

    summary = transform(extract())
    load(summary["total_order_value"])
